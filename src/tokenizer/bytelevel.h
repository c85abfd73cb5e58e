// GPT-2's byte-level alphabet (bytes_to_unicode in GPT-2's encoder.py, ByteLevel in Hugging Face's
// tokenizers): every byte is one visible character, so a vocabulary of byte strings can be written
// as JSON text. Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) are themselves; the other 68
// (space, control bytes, 0x7F..0xA0, 0xAD) become U+0100.. in byte order: space is 'Ġ' (U+0120),
// '\n' is 'Ċ' (U+010A), '\r' is 'č' (U+010D).
#ifndef CTRON_BYTELEVEL_H
#define CTRON_BYTELEVEL_H
#include <stddef.h>
#include <stdint.h>

// The code point that stands for byte b.
uint32_t bytelevel_char(uint8_t b);

// The UTF-8 of the byte-level string of in[0..n): writes at most 2n bytes to out, returns how many.
size_t bytelevel_encode(const uint8_t *in, size_t n, char *out);

// Bytes of a token string, as tokenizers' ByteLevel decoder gives them: when every character of
// s[0..n) is in the alphabet, the bytes they stand for; otherwise (a string such as "<|x y|>", or
// invalid UTF-8) the string's own bytes. Writes at most n bytes to out, returns how many; *mapped
// (may be NULL) says which case it was.
size_t bytelevel_decode(const char *s, size_t n, uint8_t *out, int *mapped);

// One UTF-8 character at s[i] (i < n): its code point, and its length in *len (1 for an invalid
// or truncated sequence, whose code point is then returned as UINT32_MAX).
uint32_t utf8_next(const uint8_t *s, size_t n, size_t i, size_t *len);
#endif
