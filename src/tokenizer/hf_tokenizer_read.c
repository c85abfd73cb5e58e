// Reading Hugging Face's tokenizer.json into a Bpe (see hf_tokenizer.h). Every refusal names the
// file and the JSON field, e.g. "'tok.json': model.type is "WordPiece", expected "BPE"".
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer/added_tokens.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/hf_reader.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/regex_split.h"
#include "util/common.h"

int hfr_fail(Reader *r, const char *field, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "'%s': %s %s", r->path, field, msg);
    return -1;
}

const cJSON *hfr_get(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key); }

int hfr_absent(const cJSON *x) { return !x || cJSON_IsNull(x); }

// A JSON integer in [lo, hi] into *v; 0, or -1 when it is something else.
static int json_int(const cJSON *x, long lo, long hi, long *v) {
    if (!cJSON_IsNumber(x)) return -1;
    double d = x->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi) return -1;
    *v = (long)d;
    return 0;
}

int hfr_opt_bool(Reader *r, const cJSON *obj, const char *where, const char *key, int dflt, int *out) {
    const cJSON *x = hfr_get(obj, key);
    if (hfr_absent(x)) { *out = dflt; return 0; }
    if (!cJSON_IsBool(x)) return hfr_fail(r, where, "\"%s\" is not true or false", key);
    *out = cJSON_IsTrue(x);
    return 0;
}

int hfr_step(Reader *r, const cJSON *x, const char *where, const char *key, HfrStepReader one, const char **type,
             char *field, size_t field_len) {
    snprintf(field, field_len, "%s.type", where);
    *type = hfr_type(x);
    if (!cJSON_IsObject(x) || !*type) return hfr_fail(r, where, "is not an object with a \"type\"");
    if (strcmp(*type, "Sequence") != 0) return 0;
    const cJSON *list = hfr_get(x, key);
    if (!cJSON_IsArray(list)) return hfr_fail(r, where, "is a Sequence without a \"%s\" array", key);
    int i = 0;
    for (const cJSON *it = list->child; it; it = it->next, i++) {
        char sub[96];
        snprintf(sub, sizeof sub, "%s.%s[%d]", where, key, i);
        if (one(r, it, sub)) return -1;
    }
    return 1;
}

const char *hfr_type(const cJSON *obj) {
    const cJSON *t = hfr_get(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

// ---- model ---------------------------------------------------------------------------------------

// The largest id in model.vocab and added_tokens (-1 when both are empty), checking their shapes.
static int scan_ids(Reader *r, const cJSON *vocab, const cJSON *added, long *max_id) {
    *max_id = -1;
    int i = 0;
    for (const cJSON *it = vocab->child; it; it = it->next, i++) {
        long id;
        if (json_int(it, 0, BPE_MAX_VOCAB - 1, &id) != 0)
            return hfr_fail(r, "model.vocab", "entry %d (\"%.40s\") is not a token id in 0..%d", i, it->string,
                        BPE_MAX_VOCAB - 1);
        if (id > *max_id) *max_id = id;
    }
    i = 0;
    for (const cJSON *it = added ? added->child : NULL; it; it = it->next, i++) {
        long id;
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        if (!cJSON_IsObject(it)) return hfr_fail(r, where, "is not an object");
        if (json_int(hfr_get(it, "id"), 0, BPE_MAX_VOCAB - 1, &id) != 0)
            return hfr_fail(r, where, "\"id\" is not a token id in 0..%d", BPE_MAX_VOCAB - 1);
        if (!cJSON_IsString(hfr_get(it, "content"))) return hfr_fail(r, where, "\"content\" is not a string");
        if (id > *max_id) *max_id = id;
    }
    return 0;
}

// Token id's string: byte-level, the bytes it stands for (tokenizers' ByteLevel decoder);
// SentencePiece-style (char_level), the string as written, which the decoder chain turns into text.
static void set_string_token(Bpe *bpe, int32_t id, const char *s, size_t n, int kind, int *mapped) {
    if (bpe->char_level) {
        bpe_set_token(bpe, id, (const uint8_t *)s, n, kind);
        if (mapped) *mapped = 1;
        return;
    }
    uint8_t *b = xmalloc(n ? n : 1);
    size_t len = bytelevel_decode(s, n, b, mapped);
    bpe_set_token(bpe, id, b, len, kind);
    free(b);
}

// A token of model.vocab by its string, or -1.
static int32_t vocab_id(Reader *r, const char *s, size_t len) {
    int32_t name = strtab_find(&r->names, (const uint8_t *)s, len);
    return name < 0 ? -1 : r->name_tok[name];
}

static int read_vocab(Reader *r, const cJSON *vocab) {
    Bpe *bpe = r->bpe;
    int n = cJSON_GetArraySize(vocab), i = 0;
    r->name_tok = xmalloc((size_t)(n ? n : 1) * sizeof *r->name_tok);
    if (bpe->ignore_merges || bpe->char_level) {   // char_level: a character's token is looked up here
        strtab_init(&bpe->whole);
        bpe->whole_id = xmalloc((size_t)(n ? n : 1) * sizeof *bpe->whole_id);
    }
    for (const cJSON *it = vocab->child; it; it = it->next, i++) {
        int32_t id = (int32_t)it->valuedouble;   // scan_ids checked it
        int added;
        int32_t name = strtab_intern(&r->names, (const uint8_t *)it->string, strlen(it->string), &added);
        if (!added) return hfr_fail(r, "model.vocab", "has \"%.60s\" twice", it->string);
        if (bpe->tok_kind[id]) {
            size_t len;
            const uint8_t *other = bpe_token_bytes(bpe, id, &len);
            return hfr_fail(r, "model.vocab", "gives id %d to \"%.60s\" and to another token (%zu bytes, \"%.*s\")", id,
                        it->string, len, (int)(len < 40 ? len : 40), (const char *)other);
        }
        r->name_tok[name] = id;
        int mapped;
        set_string_token(bpe, id, it->string, strlen(it->string), TOK_MODEL, &mapped);
        if ((bpe->ignore_merges || bpe->char_level) && mapped) {
            size_t len;
            const uint8_t *b = bpe_token_bytes(bpe, id, &len);
            int32_t w = strtab_intern(&bpe->whole, b, len, NULL);
            bpe->whole_id[w] = id;
        }
    }
    for (int b = 0; b < 256; b++) {
        char s[8];
        uint8_t byte = (uint8_t)b;
        // Byte-level: the byte's alphabet character. Characters: the one-byte characters (ASCII),
        // and byte fallback's "<0xXX>" tokens (tokenizers writes them with {:#04X}: "<0x0A>").
        size_t len = bpe->char_level ? (b < 0x80 ? 1 : 0) : bytelevel_encode(&byte, 1, s);
        if (bpe->char_level) s[0] = (char)b;
        int32_t name = len ? strtab_find(&r->names, (const uint8_t *)s, len) : -1;
        bpe->byte_tok[b] = name >= 0 ? r->name_tok[name] : -1;
        if (bpe->char_level) {
            snprintf(s, sizeof s, "<0x%02X>", b);
            bpe->byte_fb[b] = vocab_id(r, s, 6);
        }
    }
    return 0;
}


// One merge, "a b" (tokenizers' older form: exactly one space) or ["a", "b"]: the two strings.
static int merge_parts(const cJSON *it, const char **a, size_t *la, const char **b, size_t *lb) {
    if (cJSON_IsString(it)) {
        const char *s = it->valuestring, *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' ')) return -1;
        *a = s;
        *la = (size_t)(sp - s);
        *b = sp + 1;
        *lb = strlen(sp + 1);
        return 0;
    }
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2) return -1;
    const cJSON *x = it->child, *y = x->next;
    if (!cJSON_IsString(x) || !cJSON_IsString(y)) return -1;
    *a = x->valuestring;
    *la = strlen(x->valuestring);
    *b = y->valuestring;
    *lb = strlen(y->valuestring);
    return 0;
}

static int read_merges(Reader *r, const cJSON *merges) {
    char *joined = NULL;
    size_t cap = 0;
    int i = 0, rc = 0;
    for (const cJSON *it = merges->child; it && rc == 0; it = it->next, i++) {
        if (cJSON_IsString(it) && strncmp(it->valuestring, "#version", 8) == 0) continue;   // a merges.txt header
        const char *a, *b;
        size_t la, lb;
        char where[48];
        snprintf(where, sizeof where, "model.merges[%d]", i);
        if (merge_parts(it, &a, &la, &b, &lb) != 0) {
            rc = hfr_fail(r, where, "is not \"a b\" (one space) or a pair [\"a\", \"b\"]");
            break;
        }
        if (la + lb + 1 > cap) {
            cap = 2 * (la + lb + 1);
            free(joined);
            joined = xmalloc(cap);
        }
        memcpy(joined, a, la);
        memcpy(joined + la, b, lb);
        int32_t ta = vocab_id(r, a, la), tb = vocab_id(r, b, lb), out = vocab_id(r, joined, la + lb);
        if (ta < 0 || tb < 0 || out < 0) {
            const char *missing = ta < 0 ? a : tb < 0 ? b : joined;
            size_t ml = ta < 0 ? la : tb < 0 ? lb : la + lb;
            rc = hfr_fail(r, where, "makes \"%.*s\" from \"%.*s\" and \"%.*s\", but \"%.*s\" is not in model.vocab",
                      (int)(la + lb < 60 ? la + lb : 60), joined, (int)(la < 40 ? la : 40), a, (int)(lb < 40 ? lb : 40),
                      b, (int)(ml < 60 ? ml : 60), missing);
            break;
        }
        bpe_add_merge(r->bpe, ta, tb, out);
    }
    free(joined);
    return rc;
}

static int check_model_options(Reader *r, const cJSON *model) {
    Bpe *bpe = r->bpe;
    const cJSON *dropout = hfr_get(model, "dropout");
    if (!hfr_absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0.0))
        return hfr_fail(r, "model.dropout", "is %g: BPE dropout draws random merges, ctron encodes deterministically "
                    "(expected null)", cJSON_IsNumber(dropout) ? dropout->valuedouble : NAN);
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *x = hfr_get(model, affixes[i]);
        if (!hfr_absent(x) && !(cJSON_IsString(x) && x->valuestring[0] == '\0')) {
            char field[64];
            snprintf(field, sizeof field, "model.%s", affixes[i]);
            return hfr_fail(r, field, "is set: ctron's BPE has no word affixes (expected null)");
        }
    }
    if (hfr_opt_bool(r, model, "model", "fuse_unk", 0, &bpe->fuse_unk) ||
        hfr_opt_bool(r, model, "model", "ignore_merges", 0, &bpe->ignore_merges))
        return -1;
    return 0;
}

static int check_after_vocab(Reader *r, const cJSON *model) {
    Bpe *bpe = r->bpe;
    const cJSON *unk = hfr_get(model, "unk_token");
    if (!hfr_absent(unk)) {
        if (!cJSON_IsString(unk)) return hfr_fail(r, "model.unk_token", "is not a string or null");
        bpe->unk = vocab_id(r, unk->valuestring, strlen(unk->valuestring));
        if (bpe->unk < 0) return hfr_fail(r, "model.unk_token", "\"%.60s\" is not in model.vocab", unk->valuestring);
    }
    int byte_fallback;
    if (hfr_opt_bool(r, model, "model", "byte_fallback", 0, &byte_fallback)) return -1;
    bpe->byte_fallback = byte_fallback;
    if (bpe->char_level) return 0;
    // Byte-level: byte_fallback only acts on a byte the vocabulary lacks; with all 256 it never does.
    for (int b = 0; byte_fallback && b < 256; b++)
        if (bpe->byte_tok[b] < 0)
            return hfr_fail(r, "model.byte_fallback", "is true and the vocabulary lacks byte 0x%02X: byte fallback to "
                        "<0x..> tokens is SentencePiece-style BPE, not byte-level", b);
    return 0;
}

// ---- added tokens --------------------------------------------------------------------------------

static int cmp_added(const void *x, const void *y) {
    const BpeAdded *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

static int read_added(Reader *r, const cJSON *added) {
    Bpe *bpe = r->bpe;
    int n = added ? cJSON_GetArraySize(added) : 0, i = 0;
    bpe->added = xmalloc((size_t)(n ? n : 1) * sizeof *bpe->added);
    StrTable seen;
    strtab_init(&seen);
    int rc = 0;
    for (const cJSON *it = added ? added->child : NULL; it && rc == 0; it = it->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        const char *content = hfr_get(it, "content")->valuestring;
        size_t len = strlen(content);
        if (len == 0) continue;   // tokenizers ignores an empty added token
        int flags[5];
        static const char *const keys[] = {"single_word", "lstrip", "rstrip", "normalized", "special"};
        for (int k = 0; k < 5 && rc == 0; k++) rc = hfr_opt_bool(r, it, where, keys[k], k == 3, &flags[k]);
        if (rc) break;
        int is_new;
        strtab_intern(&seen, (const uint8_t *)content, len, &is_new);
        if (!is_new) {
            rc = hfr_fail(r, where, "repeats the content \"%.60s\" of an earlier added token", content);
            break;
        }
        int32_t id = (int32_t)hfr_get(it, "id")->valuedouble;
        for (int j = 0; j < bpe->n_added; j++)
            if (bpe->added[j].id == id) rc = hfr_fail(r, where, "repeats the id %d of an earlier added token", id);
        if (rc) break;
        // A normalized token is matched in normalized text by its normalized content, and decodes to
        // that too (tokenizers' normalized_cache).
        NormBuf nb = {0}, tmp = {0};
        const uint8_t *text = (const uint8_t *)content;
        if (flags[3]) text = normalize_apply(bpe->norm, bpe->n_norm, text, len, &nb, &tmp, &len);
        BpeAdded *a = &bpe->added[bpe->n_added++];
        a->id = id;
        a->content = xmalloc(len ? len : 1);
        if (len) memcpy(a->content, text, len);
        a->len = (uint32_t)len;
        a->single_word = (uint8_t)flags[0];
        a->lstrip = (uint8_t)flags[1];
        a->rstrip = (uint8_t)flags[2];
        a->normalized = (uint8_t)flags[3];
        a->special = (uint8_t)flags[4];
        // Decoding an added id gives its content (through the ByteLevel decoder, as tokenizers does).
        int kind = (bpe->tok_kind[id] & TOK_MODEL) | TOK_ADDED | (a->special ? TOK_SPECIAL : 0);
        set_string_token(bpe, id, (const char *)a->content, len, kind, NULL);
        normbuf_free(&nb);
        normbuf_free(&tmp);
    }
    strtab_free(&seen);
    if (rc) return rc;
    qsort(bpe->added, (size_t)bpe->n_added, sizeof *bpe->added, cmp_added);
    bpe->added_index = added_index_build(bpe->added, bpe->n_added);
    return 0;
}

// ---- post-processor ------------------------------------------------------------------------------

static void append_ids(int32_t **ids, int *n, const int32_t *more, int k) {
    *ids = realloc(*ids, (size_t)(*n + k + 1) * sizeof **ids);
    if (!*ids) ctron_fatal("out of memory");
    if (k) memcpy(*ids + *n, more, (size_t)k * sizeof **ids);
    *n += k;
}

static int check_id(Reader *r, const char *field, long id) {
    if (id < 0 || id >= r->bpe->vocab_size)
        return hfr_fail(r, field, "uses id %ld, outside the vocabulary 0..%d", id, r->bpe->vocab_size - 1);
    return 0;
}

// TemplateProcessing's "single": the special tokens' ids before and after $A.
static int read_template(Reader *r, const cJSON *x, const char *where, int32_t **pre, int *n_pre, int32_t **post,
                         int *n_post) {
    char field[96];
    snprintf(field, sizeof field, "%s.single", where);
    const cJSON *single = hfr_get(x, "single"), *specials = hfr_get(x, "special_tokens");
    if (!cJSON_IsArray(single)) return hfr_fail(r, field, "is not an array");
    int seen_a = 0, i = 0;
    for (const cJSON *it = single->child; it; it = it->next, i++) {
        const cJSON *sp = hfr_get(it, "SpecialToken"), *seq = hfr_get(it, "Sequence");
        if (cJSON_IsObject(seq)) {
            const cJSON *sid = hfr_get(seq, "id");
            if (!cJSON_IsString(sid) || strcmp(sid->valuestring, "A") != 0 || seen_a)
                return hfr_fail(r, field, "has a sequence other than one $A at item %d", i);
            seen_a = 1;
            continue;
        }
        const cJSON *name = cJSON_IsObject(sp) ? hfr_get(sp, "id") : NULL;
        if (!cJSON_IsString(name)) return hfr_fail(r, field, "item %d is neither a SpecialToken nor the Sequence $A", i);
        const cJSON *def = cJSON_IsObject(specials) ? hfr_get(specials, name->valuestring) : NULL, *ids = hfr_get(def, "ids");
        if (!cJSON_IsArray(ids))
            return hfr_fail(r, field, "uses \"%.60s\", which %s.special_tokens does not define with \"ids\"",
                        name->valuestring, where);
        for (const cJSON *idx = ids->child; idx; idx = idx->next) {
            long id;
            if (json_int(idx, 0, BPE_MAX_VOCAB - 1, &id) != 0 || id >= r->bpe->vocab_size)
                return hfr_fail(r, field, "\"%.60s\" has an id outside the vocabulary 0..%d", name->valuestring,
                            r->bpe->vocab_size - 1);
            int32_t v = (int32_t)id;
            if (seen_a) append_ids(post, n_post, &v, 1);
            else append_ids(pre, n_pre, &v, 1);
        }
    }
    if (!seen_a) return hfr_fail(r, field, "has no $A: where does the text go?");
    return 0;
}

// ["<s>", 0]: RobertaProcessing's and BertProcessing's cls and sep.
static int read_pair_id(Reader *r, const cJSON *x, const char *where, const char *key, int32_t *id) {
    char field[96];
    snprintf(field, sizeof field, "%s.%s", where, key);
    const cJSON *p = hfr_get(x, key);
    long v;
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || json_int(cJSON_GetArrayItem(p, 1), 0, BPE_MAX_VOCAB - 1, &v))
        return hfr_fail(r, field, "is not a [token, id] pair");
    if (check_id(r, field, v)) return -1;
    *id = (int32_t)v;
    return 0;
}

// One post-processor; a Sequence wraps each one's ids around the previous ones'.
static int read_post_one(Reader *r, const cJSON *x, const char *where) {
    Bpe *bpe = r->bpe;
    const char *type;
    char field[96];
    int seq = hfr_step(r, x, where, "processors", read_post_one, &type, field, sizeof field);
    if (seq) return seq < 0 ? -1 : 0;
    if (strcmp(type, "ByteLevel") == 0) return 0;   // offsets only: no ids
    int32_t *pre = NULL, *post = NULL;
    int n_pre = 0, n_post = 0, rc;
    if (strcmp(type, "TemplateProcessing") == 0) {
        rc = read_template(r, x, where, &pre, &n_pre, &post, &n_post);
    } else if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        int32_t cls, sep;
        rc = read_pair_id(r, x, where, "cls", &cls) || read_pair_id(r, x, where, "sep", &sep);
        if (rc == 0) {
            append_ids(&pre, &n_pre, &cls, 1);
            append_ids(&post, &n_post, &sep, 1);
        }
    } else {
        rc = hfr_fail(r, field, "is \"%.40s\": ctron reads ByteLevel, TemplateProcessing, RobertaProcessing, "
                  "BertProcessing and Sequence post-processors", type);
    }
    if (rc == 0) {   // around what the processors before it added
        append_ids(&pre, &n_pre, bpe->bos, bpe->n_bos);
        append_ids(&bpe->eos, &bpe->n_eos, post, n_post);
        free(bpe->bos);
        bpe->bos = pre;
        bpe->n_bos = n_pre;
        pre = NULL;
    }
    free(pre);
    free(post);
    return rc ? -1 : 0;
}

// ---- the whole file ------------------------------------------------------------------------------

static int read_rest(Reader *r, const cJSON *root, const cJSON *model) {
    const cJSON *merges = hfr_get(model, "merges");
    if (!cJSON_IsArray(merges)) return hfr_fail(r, "model.merges", "is %s, expected an array", merges ? "not an array" : "missing");
    if (read_merges(r, merges) || check_after_vocab(r, model) || read_added(r, hfr_get(root, "added_tokens")))
        return -1;
    const cJSON *post = hfr_get(root, "post_processor");
    if (!hfr_absent(post) && read_post_one(r, post, "post_processor")) return -1;
    return hfr_read_decoder(r, hfr_get(root, "decoder"));
}

int hf_tokenizer_read(Bpe *bpe, const cJSON *root, const char *path, char *err, size_t errlen) {
    memset(bpe, 0, sizeof *bpe);
    Reader r = {path, err, errlen, bpe, {0}, NULL};
    const cJSON *model = hfr_get(root, "model");
    if (!cJSON_IsObject(model)) {
        hfr_fail(&r, "model", "is %s, expected an object", model ? "not an object" : "missing");
        return -1;
    }
    const char *type = hfr_type(model);
    // tokenizers reads a model without "type" by its fields: merges make it BPE.
    if ((type && strcmp(type, "BPE") != 0) || (!type && !hfr_get(model, "merges"))) {
        hfr_fail(&r, "model.type", "is %s%.40s%s, expected \"BPE\": ctron reads byte-level BPE tokenizers only",
             type ? "\"" : "", type ? type : "missing", type ? "\"" : "");
        return -1;
    }
    const cJSON *vocab = hfr_get(model, "vocab"), *added = hfr_get(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) {
        hfr_fail(&r, "model.vocab", "is %s, expected an object {token: id}", vocab ? "not an object" : "missing");
        return -1;
    }
    if (!hfr_absent(added) && !cJSON_IsArray(added)) {
        hfr_fail(&r, "added_tokens", "is not an array");
        return -1;
    }
    long max_id;
    if (scan_ids(&r, vocab, cJSON_IsArray(added) ? added : NULL, &max_id)) return -1;
    if (max_id < 0) {
        hfr_fail(&r, "model.vocab", "is empty");
        return -1;
    }
    bpe_init_tables(bpe, (int)max_id + 1);
    snprintf(bpe->source, sizeof bpe->source, "tokenizer.json");
    strtab_init(&r.names);
    int rc = check_model_options(&r, model) || hfr_read_normalizer(&r, hfr_get(root, "normalizer")) ||
                     hfr_read_pre(&r, hfr_get(root, "pre_tokenizer")) || read_vocab(&r, vocab) ||
                     read_rest(&r, root, model) ? -1 : 0;
    strtab_free(&r.names);
    free(r.name_tok);
    if (rc) bpe_free(bpe);
    return rc;
}
