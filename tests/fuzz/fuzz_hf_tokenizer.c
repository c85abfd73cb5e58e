// Hugging Face tokenizer.json (tokenizer/hf_tokenizer_read.c through bpe_load): any file is read or
// refused with a message, never a crash; a tokenizer that loads encodes a text of every kind of
// character (PRETOK_PROBE, which loading already matched every Split pattern against, plus
// added-token look-alikes) to ids inside its vocabulary, and decodes them; with all 256 byte tokens
// and no added tokens, decoding gives the text back.
#include <string.h>
#include "fuzz_input.h"
#include "tokenizer/bpe.h"
#include "tokenizer/regex_split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "tokenizer.json");
    char err[640];
    Bpe bpe;
    if (bpe_load(&bpe, path, err, sizeof err) != 0) return 0;
    static const char extra[] = " <|endoftext|><mask> hello world<s></s><unk> \t\n";
    size_t np = PRETOK_PROBE_LEN, n = np + sizeof extra - 1;
    uint8_t *text = malloc(n);
    memcpy(text, PRETOK_PROBE, np);
    memcpy(text + np, extra, sizeof extra - 1);
    size_t nt, nb;
    int32_t *ids = bpe_encode_doc(&bpe, text, n, &nt);
    for (size_t i = 0; i < nt; i++)
        if (ids[i] < 0 || ids[i] >= bpe.vocab_size) abort();   // every id names a token
    free(ids);
    ids = bpe_encode(&bpe, text, n, &nt);
    uint8_t *back = bpe_decode(&bpe, ids, nt, 0, &nb, err, sizeof err);
    if (!back) abort();
    // Lossless unless a byte has no token, an added token strips whitespace, a Split removes its
    // matches, or ByteLevel adds a prefix space.
    int full = bpe.n_added == 0;
    for (int b = 0; b < 256; b++) full &= bpe.byte_tok[b] >= 0;
    for (int i = 0; i < bpe.n_pre; i++)
        full &= !(bpe.pre[i].kind == PRE_SPLIT && bpe.pre[i].behavior == SPLIT_REMOVED) && !bpe.pre[i].add_prefix_space;
    if (full && (nb != n || memcmp(back, text, n) != 0)) abort();   // lossless byte-level encoding
    free(back);
    free(ids);
    free(text);
    bpe_free(&bpe);
    return 0;
}
