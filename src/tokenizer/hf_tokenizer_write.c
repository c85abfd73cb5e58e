// Writing a tokenizer that bpe_train made as Hugging Face's tokenizer.json: GPT-2's byte-level
// pipeline (ByteLevel pre-tokenizer with its regex, ByteLevel post-processor and decoder), the
// vocabulary by id, the merges in rank order as "a b" (the form every tokenizers version reads;
// byte-level strings hold no space), and the special tokens as added tokens.
#include <string.h>
#include "tokenizer/bytelevel.h"
#include "tokenizer/hf_tokenizer.h"
#include "util/common.h"

static cJSON *byte_level(int add_prefix_space, int trim_offsets) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "type", "ByteLevel");
    cJSON_AddBoolToObject(x, "add_prefix_space", add_prefix_space);
    cJSON_AddBoolToObject(x, "trim_offsets", trim_offsets);
    cJSON_AddBoolToObject(x, "use_regex", 1);
    return x;
}

// The byte-level string of a token (a fresh NUL-terminated string).
static char *token_string(const Bpe *bpe, int32_t t) {
    size_t len;
    const uint8_t *b = bpe_token_bytes(bpe, t, &len);
    char *s = xmalloc(2 * len + 1);
    s[bytelevel_encode(b, len, s)] = '\0';
    return s;
}

static cJSON *added_tokens(const Bpe *bpe) {
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; i < bpe->n_added; i++) {
        const BpeAdded *a = &bpe->added[i];
        cJSON *x = cJSON_CreateObject();
        char *content = xmalloc(a->len + 1);
        memcpy(content, a->content, a->len);
        content[a->len] = '\0';
        cJSON_AddNumberToObject(x, "id", a->id);
        cJSON_AddStringToObject(x, "content", content);
        cJSON_AddBoolToObject(x, "single_word", a->single_word);
        cJSON_AddBoolToObject(x, "lstrip", a->lstrip);
        cJSON_AddBoolToObject(x, "rstrip", a->rstrip);
        cJSON_AddBoolToObject(x, "normalized", a->normalized);
        cJSON_AddBoolToObject(x, "special", a->special);
        cJSON_AddItemToArray(list, x);
        free(content);
    }
    return list;
}

static cJSON *model(const Bpe *bpe) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddNullToObject(m, "dropout");
    cJSON_AddNullToObject(m, "unk_token");
    cJSON_AddNullToObject(m, "continuing_subword_prefix");
    cJSON_AddNullToObject(m, "end_of_word_suffix");
    cJSON_AddFalseToObject(m, "fuse_unk");
    cJSON_AddFalseToObject(m, "byte_fallback");
    cJSON_AddFalseToObject(m, "ignore_merges");
    cJSON *vocab = cJSON_AddObjectToObject(m, "vocab");
    for (int32_t t = 0; t < bpe->vocab_size; t++) {
        if (!(bpe->tok_kind[t] & TOK_MODEL)) continue;
        char *s = token_string(bpe, t);
        cJSON_AddNumberToObject(vocab, s, t);
        free(s);
    }
    cJSON *merges = cJSON_AddArrayToObject(m, "merges");
    for (int r = 0; r < bpe->n_merges; r++) {
        char *a = token_string(bpe, bpe->merges[r][0]), *b = token_string(bpe, bpe->merges[r][1]);
        size_t la = strlen(a), lb = strlen(b);
        char *line = xmalloc(la + lb + 2);
        memcpy(line, a, la);
        line[la] = ' ';
        memcpy(line + la + 1, b, lb + 1);
        cJSON_AddItemToArray(merges, cJSON_CreateString(line));
        free(line);
        free(a);
        free(b);
    }
    return m;
}

char *hf_tokenizer_write(const Bpe *bpe, char *err, size_t errlen) {
    int gpt2 = strcmp(bpe->source, "ctron train") == 0 && bpe->n_pre == 1 && bpe->pre[0].kind == PRE_BYTE_LEVEL && !bpe->pre[0].add_prefix_space &&
               bpe->pre[0].re && bpe->unk < 0 && !bpe->ignore_merges && bpe->n_bos == 0 && bpe->n_eos == 0;
    for (int b = 0; gpt2 && b < 256; b++) gpt2 = bpe->byte_tok[b] >= 0;
    if (!gpt2) {
        snprintf(err, errlen, "only a tokenizer that `ctron tokenize train` made can be written as tokenizer.json "
                 "(this one was read from %s)", bpe->source[0] ? bpe->source : "elsewhere");
        return NULL;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON_AddItemToObject(root, "added_tokens", added_tokens(bpe));
    cJSON_AddNullToObject(root, "normalizer");
    cJSON_AddItemToObject(root, "pre_tokenizer", byte_level(0, 1));
    cJSON_AddItemToObject(root, "post_processor", byte_level(1, 0));   // as GPT-2's: no ids added
    cJSON_AddItemToObject(root, "decoder", byte_level(1, 1));
    cJSON_AddItemToObject(root, "model", model(bpe));
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) ctron_fatal("out of memory printing tokenizer.json");
    return json;
}
