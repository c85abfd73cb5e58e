#include "tokenizer/text.h"
#include "util/common.h"

int32_t *text_encode(const Bpe *bpe, const char *text, size_t len, size_t *n) {
    if (bpe) return bpe_encode(bpe, (const uint8_t *)text, len, n);
    int32_t *ids = xmalloc((len ? len : 1) * sizeof(int32_t));
    for (size_t i = 0; i < len; i++) ids[i] = (unsigned char)text[i];
    *n = len;
    return ids;
}

void text_write_token(const Bpe *bpe, int32_t tok, FILE *out) {
    if (bpe && tok >= 0 && tok < bpe->vocab_size && bpe->tok_kind[tok] != TOK_NONE) {
        size_t len;
        NormBuf buf = {0};
        const uint8_t *bytes = bpe_token_text(bpe, tok, &buf, &len);
        fwrite(bytes, 1, len, out);
        normbuf_free(&buf);
    } else {
        fputc(!bpe && tok >= 0 && tok < 256 ? tok : '?', out);
    }
}
