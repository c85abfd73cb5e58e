// Reading Hugging Face's tokenizer.json into a Bpe (see hf_tokenizer.h). Every refusal names the
// file and the JSON field, e.g. "'tok.json': model.type is "WordPiece", expected "BPE"".
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer/added_tokens.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/regex_split.h"
#include "util/common.h"

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    Bpe *bpe;
    StrTable names;           // model.vocab's strings (as in the file) -> name id
    int32_t *name_tok;        // name id -> token id
} Reader;

static int fail(Reader *r, const char *field, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "'%s': %s %s", r->path, field, msg);
    return -1;
}

static const cJSON *get(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key); }

static int is_absent(const cJSON *x) { return !x || cJSON_IsNull(x); }

// A JSON integer in [lo, hi] into *v; 0, or -1 when it is something else.
static int json_int(const cJSON *x, long lo, long hi, long *v) {
    if (!cJSON_IsNumber(x)) return -1;
    double d = x->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi) return -1;
    *v = (long)d;
    return 0;
}

// An optional boolean field (absent or null: dflt).
static int opt_bool(Reader *r, const cJSON *obj, const char *where, const char *key, int dflt, int *out) {
    const cJSON *x = get(obj, key);
    if (is_absent(x)) { *out = dflt; return 0; }
    if (!cJSON_IsBool(x)) return fail(r, where, "\"%s\" is not true or false", key);
    *out = cJSON_IsTrue(x);
    return 0;
}

static const char *type_of(const cJSON *obj) {
    const cJSON *t = get(obj, "type");
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
            return fail(r, "model.vocab", "entry %d (\"%.40s\") is not a token id in 0..%d", i, it->string,
                        BPE_MAX_VOCAB - 1);
        if (id > *max_id) *max_id = id;
    }
    i = 0;
    for (const cJSON *it = added ? added->child : NULL; it; it = it->next, i++) {
        long id;
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        if (!cJSON_IsObject(it)) return fail(r, where, "is not an object");
        if (json_int(get(it, "id"), 0, BPE_MAX_VOCAB - 1, &id) != 0)
            return fail(r, where, "\"id\" is not a token id in 0..%d", BPE_MAX_VOCAB - 1);
        if (!cJSON_IsString(get(it, "content"))) return fail(r, where, "\"content\" is not a string");
        if (id > *max_id) *max_id = id;
    }
    return 0;
}

// The bytes a token string stands for (tokenizers' ByteLevel decoder), set as token id.
static void set_string_token(Bpe *bpe, int32_t id, const char *s, int kind, int *mapped) {
    size_t n = strlen(s);
    uint8_t *b = xmalloc(n ? n : 1);
    size_t len = bytelevel_decode(s, n, b, mapped);
    bpe_set_token(bpe, id, b, len, kind);
    free(b);
}

static int read_vocab(Reader *r, const cJSON *vocab) {
    Bpe *bpe = r->bpe;
    int n = cJSON_GetArraySize(vocab), i = 0;
    r->name_tok = xmalloc((size_t)(n ? n : 1) * sizeof *r->name_tok);
    if (bpe->ignore_merges) {
        strtab_init(&bpe->whole);
        bpe->whole_id = xmalloc((size_t)(n ? n : 1) * sizeof *bpe->whole_id);
    }
    for (const cJSON *it = vocab->child; it; it = it->next, i++) {
        int32_t id = (int32_t)it->valuedouble;   // scan_ids checked it
        int added;
        int32_t name = strtab_intern(&r->names, (const uint8_t *)it->string, strlen(it->string), &added);
        if (!added) return fail(r, "model.vocab", "has \"%.60s\" twice", it->string);
        if (bpe->tok_kind[id]) {
            size_t len;
            const uint8_t *other = bpe_token_bytes(bpe, id, &len);
            return fail(r, "model.vocab", "gives id %d to \"%.60s\" and to another token (%zu bytes, \"%.*s\")", id,
                        it->string, len, (int)(len < 40 ? len : 40), (const char *)other);
        }
        r->name_tok[name] = id;
        int mapped;
        set_string_token(bpe, id, it->string, TOK_MODEL, &mapped);
        if (bpe->ignore_merges && mapped) {
            size_t len;
            const uint8_t *b = bpe_token_bytes(bpe, id, &len);
            int32_t w = strtab_intern(&bpe->whole, b, len, NULL);
            bpe->whole_id[w] = id;
        }
    }
    for (int b = 0; b < 256; b++) {
        char s[2];
        uint8_t byte = (uint8_t)b;
        size_t len = bytelevel_encode(&byte, 1, s);
        int32_t name = strtab_find(&r->names, (const uint8_t *)s, len);
        bpe->byte_tok[b] = name >= 0 ? r->name_tok[name] : -1;
    }
    return 0;
}

// A token of model.vocab by its string, or -1.
static int32_t vocab_id(Reader *r, const char *s, size_t len) {
    int32_t name = strtab_find(&r->names, (const uint8_t *)s, len);
    return name < 0 ? -1 : r->name_tok[name];
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
            rc = fail(r, where, "is not \"a b\" (one space) or a pair [\"a\", \"b\"]");
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
            rc = fail(r, where, "makes \"%.*s\" from \"%.*s\" and \"%.*s\", but \"%.*s\" is not in model.vocab",
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
    const cJSON *dropout = get(model, "dropout");
    if (!is_absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0.0))
        return fail(r, "model.dropout", "is %g: BPE dropout draws random merges, ctron encodes deterministically "
                    "(expected null)", cJSON_IsNumber(dropout) ? dropout->valuedouble : NAN);
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *x = get(model, affixes[i]);
        if (!is_absent(x) && !(cJSON_IsString(x) && x->valuestring[0] == '\0')) {
            char field[64];
            snprintf(field, sizeof field, "model.%s", affixes[i]);
            return fail(r, field, "is set: byte-level BPE has no word affixes (expected null)");
        }
    }
    if (opt_bool(r, model, "model", "fuse_unk", 0, &bpe->fuse_unk) ||
        opt_bool(r, model, "model", "ignore_merges", 0, &bpe->ignore_merges))
        return -1;
    return 0;
}

static int check_after_vocab(Reader *r, const cJSON *model) {
    Bpe *bpe = r->bpe;
    const cJSON *unk = get(model, "unk_token");
    if (!is_absent(unk)) {
        if (!cJSON_IsString(unk)) return fail(r, "model.unk_token", "is not a string or null");
        bpe->unk = vocab_id(r, unk->valuestring, strlen(unk->valuestring));
        if (bpe->unk < 0) return fail(r, "model.unk_token", "\"%.60s\" is not in model.vocab", unk->valuestring);
    }
    int byte_fallback;
    if (opt_bool(r, model, "model", "byte_fallback", 0, &byte_fallback)) return -1;
    // byte_fallback only acts on a byte the vocabulary lacks; with all 256 it never does.
    for (int b = 0; byte_fallback && b < 256; b++)
        if (bpe->byte_tok[b] < 0)
            return fail(r, "model.byte_fallback", "is true and the vocabulary lacks byte 0x%02X: byte fallback to "
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
        const char *content = get(it, "content")->valuestring;
        size_t len = strlen(content);
        if (len == 0) continue;   // tokenizers ignores an empty added token
        int flags[5];
        static const char *const keys[] = {"single_word", "lstrip", "rstrip", "normalized", "special"};
        for (int k = 0; k < 5 && rc == 0; k++) rc = opt_bool(r, it, where, keys[k], k == 3, &flags[k]);
        if (rc) break;
        int is_new;
        strtab_intern(&seen, (const uint8_t *)content, len, &is_new);
        if (!is_new) {
            rc = fail(r, where, "repeats the content \"%.60s\" of an earlier added token", content);
            break;
        }
        int32_t id = (int32_t)get(it, "id")->valuedouble;
        for (int j = 0; j < bpe->n_added; j++)
            if (bpe->added[j].id == id) rc = fail(r, where, "repeats the id %d of an earlier added token", id);
        if (rc) break;
        BpeAdded *a = &bpe->added[bpe->n_added++];
        a->id = id;
        a->content = xmalloc(len);
        memcpy(a->content, content, len);
        a->len = (uint32_t)len;
        a->single_word = (uint8_t)flags[0];
        a->lstrip = (uint8_t)flags[1];
        a->rstrip = (uint8_t)flags[2];
        a->normalized = (uint8_t)flags[3];
        a->special = (uint8_t)flags[4];
        // Decoding an added id gives its content (through the ByteLevel decoder, as tokenizers does).
        int kind = (bpe->tok_kind[id] & TOK_MODEL) | TOK_ADDED | (a->special ? TOK_SPECIAL : 0);
        set_string_token(bpe, id, content, kind, NULL);
    }
    strtab_free(&seen);
    if (rc) return rc;
    qsort(bpe->added, (size_t)bpe->n_added, sizeof *bpe->added, cmp_added);
    bpe->added_index = added_index_build(bpe->added, bpe->n_added);
    return 0;
}

// ---- pre-tokenizer -------------------------------------------------------------------------------

static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};

static int read_split(Reader *r, const cJSON *x, const char *where, PreStep *st) {
    char field[96];
    const cJSON *pat = get(x, "pattern");
    const cJSON *regex = cJSON_IsObject(pat) ? get(pat, "Regex") : NULL, *str = cJSON_IsObject(pat) ? get(pat, "String") : NULL;
    snprintf(field, sizeof field, "%s.pattern", where);
    if (!cJSON_IsString(regex) && !cJSON_IsString(str)) return fail(r, field, "is not {\"Regex\": ...} or {\"String\": ...}");
    const char *p = cJSON_IsString(regex) ? regex->valuestring : str->valuestring;
    char why[320];
    st->kind = PRE_SPLIT;
    st->re = preregex_compile(p, strlen(p), !cJSON_IsString(regex), why, sizeof why);
    if (!st->re) return fail(r, field, "\"%.80s\": %s", p, why);
    const cJSON *b = get(x, "behavior");
    snprintf(field, sizeof field, "%s.behavior", where);
    st->behavior = -1;
    for (int i = 0; i < 5; i++)
        if (cJSON_IsString(b) && strcmp(b->valuestring, behaviors[i]) == 0) st->behavior = i;
    if (st->behavior < 0)
        return fail(r, field, "is %s%.40s%s, expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                    "Contiguous", cJSON_IsString(b) ? "\"" : "", cJSON_IsString(b) ? b->valuestring : "not a string",
                    cJSON_IsString(b) ? "\"" : "");
    return opt_bool(r, x, where, "invert", 0, &st->invert);
}

// One pre-tokenizer (where names it in messages); a Sequence adds its steps in order.
static int read_pre_one(Reader *r, const cJSON *x, const char *where) {
    Bpe *bpe = r->bpe;
    char field[96];
    snprintf(field, sizeof field, "%s.type", where);
    const char *type = type_of(x);
    if (!cJSON_IsObject(x) || !type) return fail(r, where, "is not an object with a \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = get(x, "pretokenizers");
        if (!cJSON_IsArray(list)) return fail(r, where, "is a Sequence without a \"pretokenizers\" array");
        int i = 0;
        for (const cJSON *it = list->child; it; it = it->next, i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.pretokenizers[%d]", where, i);
            if (read_pre_one(r, it, sub)) return -1;
        }
        return 0;
    }
    int is_split = strcmp(type, "Split") == 0, is_bl = strcmp(type, "ByteLevel") == 0;
    if (!is_split && !is_bl)
        return fail(r, field, "is \"%.40s\": ctron reads ByteLevel and Split pre-tokenizers (byte-level BPE)", type);
    if (bpe->n_pre == BPE_MAX_PRE_STEPS) return fail(r, where, "has more than %d steps", BPE_MAX_PRE_STEPS);
    if (bpe->n_pre > 0 && bpe->pre[bpe->n_pre - 1].kind == PRE_BYTE_LEVEL)
        return fail(r, where, "follows the ByteLevel step: ctron reads pipelines whose last step is ByteLevel");
    PreStep *st = &bpe->pre[bpe->n_pre++];
    memset(st, 0, sizeof *st);
    if (is_split) return read_split(r, x, where, st);
    st->kind = PRE_BYTE_LEVEL;
    int use_regex;
    if (opt_bool(r, x, where, "add_prefix_space", 1, &st->add_prefix_space) ||
        opt_bool(r, x, where, "use_regex", 1, &use_regex))
        return -1;
    if (use_regex) {
        char why[320];
        st->re = preregex_compile(PRETOK_GPT2_PATTERN, strlen(PRETOK_GPT2_PATTERN), 0, why, sizeof why);
        if (!st->re) ctron_fatal("GPT-2's pattern does not compile: %s", why);
    }
    return 0;
}

static int read_pre(Reader *r, const cJSON *pre) {
    if (is_absent(pre))
        return fail(r, "pre_tokenizer", "is null: a byte-level BPE tokenizer needs a ByteLevel pre-tokenizer");
    if (read_pre_one(r, pre, "pre_tokenizer")) return -1;
    if (r->bpe->pre[r->bpe->n_pre - 1].kind != PRE_BYTE_LEVEL)
        return fail(r, "pre_tokenizer", "has no ByteLevel step: ctron reads byte-level BPE tokenizers only");
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
        return fail(r, field, "uses id %ld, outside the vocabulary 0..%d", id, r->bpe->vocab_size - 1);
    return 0;
}

// TemplateProcessing's "single": the special tokens' ids before and after $A.
static int read_template(Reader *r, const cJSON *x, const char *where, int32_t **pre, int *n_pre, int32_t **post,
                         int *n_post) {
    char field[96];
    snprintf(field, sizeof field, "%s.single", where);
    const cJSON *single = get(x, "single"), *specials = get(x, "special_tokens");
    if (!cJSON_IsArray(single)) return fail(r, field, "is not an array");
    int seen_a = 0, i = 0;
    for (const cJSON *it = single->child; it; it = it->next, i++) {
        const cJSON *sp = get(it, "SpecialToken"), *seq = get(it, "Sequence");
        if (cJSON_IsObject(seq)) {
            const cJSON *sid = get(seq, "id");
            if (!cJSON_IsString(sid) || strcmp(sid->valuestring, "A") != 0 || seen_a)
                return fail(r, field, "has a sequence other than one $A at item %d", i);
            seen_a = 1;
            continue;
        }
        const cJSON *name = cJSON_IsObject(sp) ? get(sp, "id") : NULL;
        if (!cJSON_IsString(name)) return fail(r, field, "item %d is neither a SpecialToken nor the Sequence $A", i);
        const cJSON *def = cJSON_IsObject(specials) ? get(specials, name->valuestring) : NULL, *ids = get(def, "ids");
        if (!cJSON_IsArray(ids))
            return fail(r, field, "uses \"%.60s\", which %s.special_tokens does not define with \"ids\"",
                        name->valuestring, where);
        for (const cJSON *idx = ids->child; idx; idx = idx->next) {
            long id;
            if (json_int(idx, 0, BPE_MAX_VOCAB - 1, &id) != 0 || id >= r->bpe->vocab_size)
                return fail(r, field, "\"%.60s\" has an id outside the vocabulary 0..%d", name->valuestring,
                            r->bpe->vocab_size - 1);
            int32_t v = (int32_t)id;
            if (seen_a) append_ids(post, n_post, &v, 1);
            else append_ids(pre, n_pre, &v, 1);
        }
    }
    if (!seen_a) return fail(r, field, "has no $A: where does the text go?");
    return 0;
}

// ["<s>", 0]: RobertaProcessing's and BertProcessing's cls and sep.
static int read_pair_id(Reader *r, const cJSON *x, const char *where, const char *key, int32_t *id) {
    char field[96];
    snprintf(field, sizeof field, "%s.%s", where, key);
    const cJSON *p = get(x, key);
    long v;
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || json_int(cJSON_GetArrayItem(p, 1), 0, BPE_MAX_VOCAB - 1, &v))
        return fail(r, field, "is not a [token, id] pair");
    if (check_id(r, field, v)) return -1;
    *id = (int32_t)v;
    return 0;
}

// One post-processor; a Sequence wraps each one's ids around the previous ones'.
static int read_post_one(Reader *r, const cJSON *x, const char *where) {
    Bpe *bpe = r->bpe;
    const char *type = type_of(x);
    char field[96];
    snprintf(field, sizeof field, "%s.type", where);
    if (!cJSON_IsObject(x) || !type) return fail(r, where, "is not an object with a \"type\"");
    if (strcmp(type, "ByteLevel") == 0) return 0;   // offsets only: no ids
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = get(x, "processors");
        if (!cJSON_IsArray(list)) return fail(r, where, "is a Sequence without a \"processors\" array");
        int i = 0;
        for (const cJSON *it = list->child; it; it = it->next, i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.processors[%d]", where, i);
            if (read_post_one(r, it, sub)) return -1;
        }
        return 0;
    }
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
        rc = fail(r, field, "is \"%.40s\": ctron reads ByteLevel, TemplateProcessing, RobertaProcessing, "
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
    const cJSON *merges = get(model, "merges");
    if (!cJSON_IsArray(merges)) return fail(r, "model.merges", "is %s, expected an array", merges ? "not an array" : "missing");
    if (read_merges(r, merges) || check_after_vocab(r, model) || read_added(r, get(root, "added_tokens")))
        return -1;
    const cJSON *norm = get(root, "normalizer");
    if (!is_absent(norm))
        return fail(r, "normalizer.type", "is %s%.40s%s: ctron reads tokenizers without a normalizer (null)",
                    type_of(norm) ? "\"" : "", type_of(norm) ? type_of(norm) : "unknown", type_of(norm) ? "\"" : "");
    if (read_pre(r, get(root, "pre_tokenizer"))) return -1;
    const cJSON *post = get(root, "post_processor");
    if (!is_absent(post) && read_post_one(r, post, "post_processor")) return -1;
    const cJSON *dec = get(root, "decoder");
    if (!is_absent(dec) && !(type_of(dec) && strcmp(type_of(dec), "ByteLevel") == 0))
        return fail(r, "decoder.type", "is %s%.40s%s: ctron decodes byte-level (ByteLevel or null)",
                    type_of(dec) ? "\"" : "", type_of(dec) ? type_of(dec) : "unknown", type_of(dec) ? "\"" : "");
    return 0;
}

int hf_tokenizer_read(Bpe *bpe, const cJSON *root, const char *path, char *err, size_t errlen) {
    memset(bpe, 0, sizeof *bpe);
    Reader r = {path, err, errlen, bpe, {0}, NULL};
    const cJSON *model = get(root, "model");
    if (!cJSON_IsObject(model)) {
        fail(&r, "model", "is %s, expected an object", model ? "not an object" : "missing");
        return -1;
    }
    const char *type = type_of(model);
    // tokenizers reads a model without "type" by its fields: merges make it BPE.
    if ((type && strcmp(type, "BPE") != 0) || (!type && !get(model, "merges"))) {
        fail(&r, "model.type", "is %s%.40s%s, expected \"BPE\": ctron reads byte-level BPE tokenizers only",
             type ? "\"" : "", type ? type : "missing", type ? "\"" : "");
        return -1;
    }
    const cJSON *vocab = get(model, "vocab"), *added = get(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) {
        fail(&r, "model.vocab", "is %s, expected an object {token: id}", vocab ? "not an object" : "missing");
        return -1;
    }
    if (!is_absent(added) && !cJSON_IsArray(added)) {
        fail(&r, "added_tokens", "is not an array");
        return -1;
    }
    long max_id;
    if (scan_ids(&r, vocab, cJSON_IsArray(added) ? added : NULL, &max_id)) return -1;
    if (max_id < 0) {
        fail(&r, "model.vocab", "is empty");
        return -1;
    }
    bpe_init_tables(bpe, (int)max_id + 1);
    snprintf(bpe->source, sizeof bpe->source, "tokenizer.json");
    strtab_init(&r.names);
    int rc = check_model_options(&r, model) || read_vocab(&r, vocab) || read_rest(&r, root, model) ? -1 : 0;
    strtab_free(&r.names);
    free(r.name_tok);
    if (rc) bpe_free(bpe);
    return rc;
}
