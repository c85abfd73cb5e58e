// BPE tokenizer, read from two file formats (bpe_load):
//  - Hugging Face's tokenizer.json (tokenizer/hf_tokenizer.h): a model vocabulary with arbitrary
//    ids, ranked merges, added and special tokens, a normalizer, a pre-tokenizer pipeline (ByteLevel
//    with GPT-2's regex, or Split with any pattern such as Llama 3's, then ByteLevel; or, for
//    SentencePiece-style files such as Llama 2's, none or Metaspace), a post-processor's BOS/EOS and,
//    SentencePiece-style, a decoder chain. What `ctron tokenize train` writes (bpe_save) is byte-level.
//  - ctron's older vocabulary file, read for the checkpoints that carry one (bpe_json.c):
//        {"type":"ctron-bpe","version":1,"vocab_size":N,"pretokenizer":"gpt2-bytes","merges":[[a,b],...]}
//    tokens 0..255 are the bytes, token 256+i is merge i = merges[i][0] followed by merges[i][1]
//    (both < 256+i, no pair twice), pre-split by tokenizer/pretokenize.h's byte scanner.
//
// Encoding is exactly tokenizers' Tokenizer.encode (see bpe_encode); with a byte-level vocabulary of
// all 256 byte tokens every byte string, invalid UTF-8 and NUL bytes included, encodes and decodes
// back to itself.
#ifndef CTRON_BPE_H
#define CTRON_BPE_H
#include <stddef.h>
#include <stdint.h>
#include "tokenizer/decoders.h"
#include "tokenizer/hashtab.h"
#include "tokenizer/normalize.h"

// Largest vocabulary (model tokens and added tokens, ids 0..BPE_MAX_VOCAB-1): far past any real one
// (Llama 3: 128,256; Gemma: 262,144) while keeping a hand-made file's tables bounded.
#define BPE_MAX_VOCAB (1 << 22)
// ctron's older vocabulary file kept token ids below 65536 (its token files were uint16).
#define BPE_LEGACY_MAX_VOCAB 65536

struct PreRegex;

// One step of the pre-tokenizer pipeline; each cuts every piece of the step before into pieces.
typedef enum {
    PRE_LEGACY_BYTES,         // ctron's older scanner (tokenizer/pretokenize.h)
    PRE_BYTE_LEVEL,           // tokenizers' ByteLevel: optional prefix space, GPT-2's regex when use_regex
    PRE_SPLIT,                // tokenizers' Split: a pattern and a behavior
    PRE_METASPACE             // tokenizers' Metaspace: ' ' becomes the replacement, which is prepended
                              // (always, or only to the text's first piece) and optionally split on
} PreKind;

typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } PrependScheme;

typedef struct {
    PreKind kind;
    struct PreRegex *re;      // SPLIT: its pattern; BYTE_LEVEL with use_regex: GPT-2's; else NULL
    int behavior;             // SPLIT: SplitBehavior (tokenizer/regex_split.h)
    int invert;               // SPLIT
    int add_prefix_space;     // BYTE_LEVEL: a piece not starting with ' ' gets one
    uint8_t repl[4];          // METASPACE: the replacement character (UTF-8), "▁" in every real file
    int repl_len;
    int prepend;              // METASPACE: PrependScheme
    int split;                // METASPACE: cut before each replacement (MergedWithNext)
} PreStep;
#define BPE_MAX_PRE_STEPS 8

// An added token (tokenizers' AddedToken): matched in the text before pre-tokenization.
typedef struct {
    int32_t id;
    uint8_t *content;         // the text it matches (UTF-8 as in the file, not byte-level)
    uint32_t len;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} BpeAdded;

enum { TOK_NONE = 0, TOK_MODEL = 1, TOK_ADDED = 2, TOK_SPECIAL = 4 };   // tok_kind bits

typedef struct {
    int vocab_size;           // 1 + the largest id (model or added); ids without a token are holes
    int n_merges;
    int32_t (*merges)[2];     // merge of rank r joins merges[r][0] and merges[r][1] ...
    int32_t *merge_out;       // ... into token merge_out[r]
    PairTable rank;           // pair -> pair id; pair_rank[pair id] is its rank
    int32_t *pair_rank;       // (a pair listed twice in a tokenizer.json takes its later rank, as in tokenizers)
    int32_t byte_tok[256];    // the token of each single byte, -1 when the vocabulary lacks it
    uint8_t *bytes;           // every token's bytes (what decoding writes), back to back
    size_t bytes_len, bytes_cap;
    size_t *tok_off;          // token -> offset in bytes
    uint32_t *tok_len;        // token -> length in bytes
    uint8_t *tok_kind;        // token -> TOK_* bits
    // The model's options (tokenizers' BPE): unknown bytes become unk (fused runs when fuse_unk),
    // or are dropped when there is no unk; with ignore_merges a piece that is a token is that token.
    int32_t unk;              // -1: none
    int fuse_unk, ignore_merges;
    StrTable whole;           // ignore_merges or char_level: bytes of every model token -> whole_id
    int32_t *whole_id;
    // SentencePiece-style BPE (Llama 2, Mistral): with no ByteLevel step the model's symbols are the
    // text's characters, token strings are taken as written (bytes/tok_off hold them, "▁" included)
    // and the decoder chain below makes text of them. A character the vocabulary lacks becomes the
    // <0xXX> tokens of its bytes with byte_fallback (byte_fb: -1 where one is missing), else unk.
    int char_level;
    int byte_fallback;
    int32_t byte_fb[256];
    NormStep norm[BPE_MAX_NORM_STEPS];   // the normalizer, on the text between non-normalized added tokens
    int n_norm;
    PreStep pre[BPE_MAX_PRE_STEPS];
    int n_pre;
    DecStep dec[BPE_MAX_DEC_STEPS];      // char_level: the decoder chain
    int n_dec;
    BpeAdded *added;          // sorted by id
    int n_added;
    struct BpeAddedIndex *added_index;   // tokenizer/added_tokens.h
    // The post-processor (add_special_tokens): ids before and after each encoded document.
    int32_t *bos, *eos;
    int n_bos, n_eos;
    char source[16];          // "tokenizer.json" or "ctron-bpe": the format it was read from
} Bpe;

typedef struct {
    size_t n_bytes;           // corpus size
    size_t n_pretokens;       // pieces after the pre-split
    size_t n_unique;          // distinct pieces (the words merges are learned on)
    double seconds;           // wall time of the whole training
} BpeTrainStats;

// Learns a vocabulary of up to vocab_size tokens from text: 256 bytes, then repeatedly the most
// frequent adjacent pair (ties: the smallest (a, b)) is merged, counting each pair once per
// occurrence, overlapping pairs like "aaa" included. The text is pre-split as GPT-2's ByteLevel
// pre-tokenizer does (Unicode classes). A merge whose bytes are already a token reuses that token,
// as tokenizers' trainer does, so every token is a distinct byte string. The special tokens
// (n_special of them, may be 0) take the last ids, within vocab_size. Stops early when no pair is
// left (a tiny corpus); then bpe->vocab_size < the request. stats may be NULL. Returns 0, or -1
// with a message in err (vocab_size outside 256 + n_special .. BPE_MAX_VOCAB).
int bpe_train(Bpe *bpe, const uint8_t *text, size_t n, int vocab_size, const char *const *special, int n_special,
              BpeTrainStats *stats, char *err, size_t errlen);

// A tokenizer in ctron's older form from its merges (copied): token 256+i = merge i. Returns 0,
// or -1 with a message in err when a merge refers to a token not yet defined, repeats an earlier
// pair, or the vocabulary exceeds 65536.
int bpe_from_merges(Bpe *bpe, const int32_t (*merges)[2], int n_merges, char *err, size_t errlen);
void bpe_free(Bpe *bpe);

// Reads either format (by its content). Errors name the file and the field.
int bpe_load(Bpe *bpe, const char *path, char *err, size_t errlen);
// Writes a tokenizer that bpe_train made as Hugging Face's tokenizer.json (hf_tokenizer_write.c),
// atomically (temp file + fsync + rename). A tokenizer with ctron's older pre-tokenizer has no
// tokenizer.json equivalent and is refused.
int bpe_save(const Bpe *bpe, const char *path, char *err, size_t errlen);

// tokenizers' encode(text, add_special_tokens=False): added tokens are found first, the rest is
// pre-tokenized and each piece encoded by the model. Returns a fresh array of *n_tokens ids (free()
// it; never NULL). Pieces are encoded once each and cached for the call.
int32_t *bpe_encode(const Bpe *bpe, const uint8_t *text, size_t n, size_t *n_tokens);
// The same with the post-processor's BOS/EOS around it (add_special_tokens=True): one document.
int32_t *bpe_encode_doc(const Bpe *bpe, const uint8_t *text, size_t n, size_t *n_tokens);
// bpe_encode_doc telling progress (bytes of text done, ids so far) about once a second.
typedef void (*BpeProgressFn)(void *ctx, size_t bytes_done, size_t tokens);
int32_t *bpe_encode_doc_progress(const Bpe *bpe, const uint8_t *text, size_t n, BpeProgressFn progress, void *ctx,
                                 size_t *n_tokens);

// An encoder kept across documents (JSONL): its cache of encoded pieces is shared by them (and
// dropped past a million pieces). add appends one document's ids (add_special: with BOS/EOS;
// progress may be NULL), push appends ids as they are, take hands over all ids so far.
typedef struct BpeEncoder BpeEncoder;
BpeEncoder *bpe_encoder_new(const Bpe *bpe);
void bpe_encoder_add(BpeEncoder *e, const uint8_t *text, size_t n, int add_special, BpeProgressFn progress, void *ctx);
void bpe_encoder_push(BpeEncoder *e, const int32_t *ids, size_t n);
size_t bpe_encoder_count(const BpeEncoder *e);
int32_t *bpe_encoder_take(BpeEncoder *e, size_t *n_tokens);   // free() it; never NULL
void bpe_encoder_free(BpeEncoder *e);

// The pieces encoding sees, in order: fn gets each piece's bytes with added == -1, or an added
// token's id with its matched text (lstrip/rstrip whitespace included).
typedef void (*BpePieceFn)(void *ctx, const uint8_t *piece, size_t len, int32_t added);
void bpe_split(const Bpe *bpe, const uint8_t *text, size_t n, BpePieceFn fn, void *ctx);

// The rank of the merge of (a, b), or -1.
int32_t bpe_pair_rank(const Bpe *bpe, int32_t a, int32_t b);

// The bytes of one token (not NUL-terminated; empty for an id without a token); tok must be in
// 0..vocab_size-1.
static inline const uint8_t *bpe_token_bytes(const Bpe *bpe, int32_t tok, size_t *len) {
    static const uint8_t none[1] = {0};
    *len = bpe->tok_len[tok];
    return bpe->bytes ? bpe->bytes + bpe->tok_off[tok] : none;   // no token bytes at all: every token empty
}

// Decodes tokens into a fresh byte array (*n_bytes long; free() it). Byte-level: each token's bytes,
// as tokenizers' ByteLevel decoder has them, but raw (tokenizers then makes a str, replacing invalid
// UTF-8 with U+FFFD). SentencePiece-style: the decoder chain's text, exactly tokenizers' decode.
// skip_special drops special tokens, as tokenizers' decode does by default.
// Returns NULL with a message in err when a token is outside 0..vocab_size-1.
uint8_t *bpe_decode(const Bpe *bpe, const int32_t *tokens, size_t n, int skip_special, size_t *n_bytes, char *err,
                    size_t errlen);

// One token's text inside a longer text, as ctron generate writes it token by token: byte-level,
// its bytes; SentencePiece-style, its string through the decoder chain (bpe_decode's) with "▁" as a
// space and a <0xXX> token as its raw byte. Points into the tokenizer or into buf.
const uint8_t *bpe_token_text(const Bpe *bpe, int32_t tok, NormBuf *buf, size_t *len);

// 1 when a and b give every text the same ids and every id the same bytes, 0 when not (the first
// difference in what), as a resumed run requires of its --tokenizer.
int bpe_same(const Bpe *a, const Bpe *b, char *what, size_t wlen);

// Internal to src/tokenizer: building the tables.
void bpe_init_tables(Bpe *bpe, int vocab_size);
void bpe_set_token(Bpe *bpe, int32_t id, const uint8_t *bytes, size_t len, int kind);
void bpe_add_merge(Bpe *bpe, int32_t a, int32_t b, int32_t out);
#endif
