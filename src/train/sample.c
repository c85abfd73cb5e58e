#include "train/sample.h"
#include <string.h>
#include "model/generate.h"
#include "tokenizer/text.h"
#include "util/common.h"

typedef struct { const Bpe *bpe; FILE *out; } SampleSink;

static void write_token(void *ctx, int32_t tok) {
    SampleSink *sink = ctx;
    text_write_token(sink->bpe, tok, sink->out);
    fflush(sink->out);
}

void sample_text(GPT *m, const Bpe *bpe, const char *prompt, int n_new, float temperature, int top_k,
                 uint64_t seed, FILE *out) {
    size_t n_prompt;
    int32_t *ids = text_encode(bpe, prompt, strlen(prompt), &n_prompt);
    if (n_prompt == 0) {   // generation needs a first token: start from a newline
        free(ids);
        ids = text_encode(bpe, "\n", 1, &n_prompt);
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (ids[i] >= m->cfg.vocab) ids[i] = '?';   // a byte the model's vocabulary does not have
    int32_t *gen = xmalloc((size_t)n_new * sizeof(int32_t));
    GenOptions go = {n_new, temperature, top_k, seed, NULL, 0};   // a training sample: its length, no stop
    GenStats st;
    SampleSink sink = {bpe, out};
    fputs(prompt, out);
    generate(m, ids, (int)n_prompt, &go, gen, write_token, &sink, &st);
    fprintf(out, "\n(%d tokens, %.0f tokens/s)\n", st.generated,
            st.total_seconds > 0 ? st.generated / st.total_seconds : 0.0);
    free(gen);
    free(ids);
}
