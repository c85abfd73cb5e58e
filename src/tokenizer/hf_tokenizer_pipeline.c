// tokenizer.json's pipeline around the BPE model: the normalizer, the pre-tokenizer and the decoder
// (hf_tokenizer.h lists what is read; docs/TOKENIZER.md what each does).
#include <string.h>
#include "tokenizer/hf_reader.h"
#include "tokenizer/regex_split.h"
#include "util/common.h"

// A fresh copy of s (n bytes) for a step's strings.
static uint8_t *dup_bytes(const char *s, size_t *n) {
    *n = strlen(s);
    uint8_t *p = xmalloc(*n ? *n : 1);
    memcpy(p, s, *n);
    return p;
}

// One character, as a JSON string (Metaspace's replacement, Strip's content): its UTF-8 in ch.
static int one_char(Reader *r, const cJSON *x, const char *field, uint8_t ch[4], int *len) {
    size_t n = cJSON_IsString(x) ? strlen(x->valuestring) : 0, clen = 0;
    if (n) {
        const uint8_t *s = (const uint8_t *)x->valuestring;
        clen = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
    }
    if (n == 0 || n != clen)
        return hfr_fail(r, field, "is %s%.40s%s, expected one character", cJSON_IsString(x) ? "\"" : "",
                        cJSON_IsString(x) ? x->valuestring : "not a string", cJSON_IsString(x) ? "\"" : "");
    memcpy(ch, x->valuestring, n);
    *len = (int)n;
    return 0;
}

// {"String": s} as tokenizers' Replace pattern; a Regex is refused (no Llama-family file uses one).
static int string_pattern(Reader *r, const cJSON *x, const char *where, uint8_t **from, size_t *len) {
    char field[96];
    snprintf(field, sizeof field, "%s.pattern", where);
    const cJSON *pat = hfr_get(x, "pattern"), *str = cJSON_IsObject(pat) ? hfr_get(pat, "String") : NULL;
    if (cJSON_IsObject(pat) && hfr_get(pat, "Regex"))
        return hfr_fail(r, field, "is a Regex: ctron's Replace takes a {\"String\": ...} pattern");
    if (!cJSON_IsString(str) || !str->valuestring[0]) return hfr_fail(r, field, "is not {\"String\": a non-empty string}");
    *from = dup_bytes(str->valuestring, len);
    return 0;
}

static int string_field(Reader *r, const cJSON *x, const char *where, const char *key, uint8_t **to, size_t *len) {
    const cJSON *c = hfr_get(x, key);
    if (!cJSON_IsString(c)) {
        char field[96];
        snprintf(field, sizeof field, "%s.%s", where, key);
        return hfr_fail(r, field, "is not a string");
    }
    *to = dup_bytes(c->valuestring, len);
    return 0;
}

// Metaspace's fields, as tokenizers reads them: prepend_scheme (default "always"), the older
// add_prefix_space (false only with prepend_scheme "never"), split (default true).
static int read_metaspace(Reader *r, const cJSON *x, const char *where, int *prepend, uint8_t repl[4], int *repl_len,
                          int *split) {
    char field[96];
    snprintf(field, sizeof field, "%s.replacement", where);
    if (one_char(r, hfr_get(x, "replacement"), field, repl, repl_len)) return -1;
    const cJSON *ps = hfr_get(x, "prepend_scheme");
    static const char *const schemes[] = {"always", "first", "never"};
    *prepend = PREPEND_ALWAYS;
    if (!hfr_absent(ps)) {
        *prepend = -1;
        for (int i = 0; i < 3; i++)
            if (cJSON_IsString(ps) && strcmp(ps->valuestring, schemes[i]) == 0) *prepend = i;
        snprintf(field, sizeof field, "%s.prepend_scheme", where);
        if (*prepend < 0) return hfr_fail(r, field, "is not \"always\", \"first\" or \"never\"");
    }
    int add_prefix_space;
    if (hfr_opt_bool(r, x, where, "add_prefix_space", 1, &add_prefix_space)) return -1;
    if (!add_prefix_space && *prepend != PREPEND_NEVER) {
        snprintf(field, sizeof field, "%s.add_prefix_space", where);
        return hfr_fail(r, field, "is false and prepend_scheme is not \"never\" (tokenizers refuses this file too)");
    }
    return split ? hfr_opt_bool(r, x, where, "split", 1, split) : 0;
}

// ---- normalizer ----------------------------------------------------------------------------------

static int read_norm_one(Reader *r, const cJSON *x, const char *where) {
    Bpe *bpe = r->bpe;
    const char *type;
    char field[96];
    int seq = hfr_step(r, x, where, "normalizers", read_norm_one, &type, field, sizeof field);
    if (seq) return seq < 0 ? -1 : 0;
    int form = norm_form_from_name(type);
    if (form < 0 && strcmp(type, "Prepend") != 0 && strcmp(type, "Replace") != 0)
        return hfr_fail(r, field, "is \"%.40s\": ctron reads the Prepend, Replace, NFC, NFD, NFKC, NFKD and Sequence "
                        "normalizers", type);
    if (bpe->n_norm == BPE_MAX_NORM_STEPS) return hfr_fail(r, where, "has more than %d steps", BPE_MAX_NORM_STEPS);
    NormStep *st = &bpe->norm[bpe->n_norm++];
    memset(st, 0, sizeof *st);
    if (form >= 0) {
        st->kind = (TextNormKind)form;
        return 0;
    }
    if (strcmp(type, "Prepend") == 0) {
        st->kind = TNORM_PREPEND;
        return string_field(r, x, where, "prepend", &st->to, &st->to_len);
    }
    st->kind = TNORM_REPLACE;
    return string_pattern(r, x, where, &st->from, &st->from_len) || string_field(r, x, where, "content", &st->to, &st->to_len)
               ? -1 : 0;
}

int hfr_read_normalizer(Reader *r, const cJSON *norm) {
    return hfr_absent(norm) ? 0 : read_norm_one(r, norm, "normalizer");
}

// ---- pre-tokenizer -------------------------------------------------------------------------------

static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};

static int read_split(Reader *r, const cJSON *x, const char *where, PreStep *st) {
    char field[96];
    const cJSON *pat = hfr_get(x, "pattern");
    const cJSON *regex = cJSON_IsObject(pat) ? hfr_get(pat, "Regex") : NULL, *str = cJSON_IsObject(pat) ? hfr_get(pat, "String") : NULL;
    snprintf(field, sizeof field, "%s.pattern", where);
    if (!cJSON_IsString(regex) && !cJSON_IsString(str)) return hfr_fail(r, field, "is not {\"Regex\": ...} or {\"String\": ...}");
    const char *p = cJSON_IsString(regex) ? regex->valuestring : str->valuestring;
    char why[320];
    st->kind = PRE_SPLIT;
    st->re = preregex_compile(p, strlen(p), !cJSON_IsString(regex), why, sizeof why);
    if (!st->re) return hfr_fail(r, field, "\"%.80s\": %s", p, why);
    const cJSON *b = hfr_get(x, "behavior");
    snprintf(field, sizeof field, "%s.behavior", where);
    st->behavior = -1;
    for (int i = 0; i < 5; i++)
        if (cJSON_IsString(b) && strcmp(b->valuestring, behaviors[i]) == 0) st->behavior = i;
    if (st->behavior < 0)
        return hfr_fail(r, field, "is %s%.40s%s, expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                    "Contiguous", cJSON_IsString(b) ? "\"" : "", cJSON_IsString(b) ? b->valuestring : "not a string",
                    cJSON_IsString(b) ? "\"" : "");
    return hfr_opt_bool(r, x, where, "invert", 0, &st->invert);
}

// One pre-tokenizer (where names it in messages); a Sequence adds its steps in order.
static int read_pre_one(Reader *r, const cJSON *x, const char *where) {
    Bpe *bpe = r->bpe;
    const char *type;
    char field[96];
    int seq = hfr_step(r, x, where, "pretokenizers", read_pre_one, &type, field, sizeof field);
    if (seq) return seq < 0 ? -1 : 0;
    int is_split = strcmp(type, "Split") == 0, is_bl = strcmp(type, "ByteLevel") == 0;
    int is_meta = strcmp(type, "Metaspace") == 0;
    if (!is_split && !is_bl && !is_meta)
        return hfr_fail(r, field, "is \"%.40s\": ctron reads ByteLevel, Split and Metaspace pre-tokenizers", type);
    if (bpe->n_pre == BPE_MAX_PRE_STEPS) return hfr_fail(r, where, "has more than %d steps", BPE_MAX_PRE_STEPS);
    if (bpe->n_pre > 0 && bpe->pre[bpe->n_pre - 1].kind == PRE_BYTE_LEVEL)
        return hfr_fail(r, where, "follows the ByteLevel step: ctron reads pipelines whose last step is ByteLevel");
    PreStep *st = &bpe->pre[bpe->n_pre++];
    memset(st, 0, sizeof *st);
    if (is_split) return read_split(r, x, where, st);
    if (is_meta) st->kind = PRE_METASPACE;
    if (is_meta) return read_metaspace(r, x, where, &st->prepend, st->repl, &st->repl_len, &st->split);
    st->kind = PRE_BYTE_LEVEL;
    int use_regex;
    if (hfr_opt_bool(r, x, where, "add_prefix_space", 1, &st->add_prefix_space) ||
        hfr_opt_bool(r, x, where, "use_regex", 1, &use_regex))
        return -1;
    if (use_regex) {
        char why[320];
        st->re = preregex_compile(PRETOK_GPT2_PATTERN, strlen(PRETOK_GPT2_PATTERN), 0, why, sizeof why);
        if (!st->re) ctron_fatal("GPT-2's pattern does not compile: %s", why);
    }
    return 0;
}

// With a ByteLevel step (last) the model works on bytes (GPT-2, Llama 3, Qwen2); without one on the
// text's characters (SentencePiece-style: Llama 2, Mistral), a null pre-tokenizer included.
int hfr_read_pre(Reader *r, const cJSON *pre) {
    Bpe *bpe = r->bpe;
    if (!hfr_absent(pre) && read_pre_one(r, pre, "pre_tokenizer")) return -1;
    int byte_level = 0, meta = 0;
    for (int i = 0; i < bpe->n_pre; i++) {
        byte_level |= bpe->pre[i].kind == PRE_BYTE_LEVEL;
        meta |= bpe->pre[i].kind == PRE_METASPACE;
    }
    if (byte_level && meta)
        return hfr_fail(r, "pre_tokenizer", "has both ByteLevel and Metaspace steps: a model works either on bytes "
                        "or on characters");
    bpe->char_level = !byte_level;
    return 0;
}

// ---- decoder -------------------------------------------------------------------------------------

static int read_dec_one(Reader *r, const cJSON *x, const char *where) {
    Bpe *bpe = r->bpe;
    const char *type;
    char field[96];
    int seq = hfr_step(r, x, where, "decoders", read_dec_one, &type, field, sizeof field);
    if (seq) return seq < 0 ? -1 : 0;
    static const char *const kinds[] = {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"};
    int kind = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(type, kinds[i]) == 0) kind = i;
    if (kind < 0)
        return hfr_fail(r, field, "is \"%.40s\": a SentencePiece-style tokenizer's decoder is read from Replace, "
                        "ByteFallback, Fuse, Strip, Metaspace and Sequence", type);
    if (bpe->n_dec == BPE_MAX_DEC_STEPS) return hfr_fail(r, where, "has more than %d steps", BPE_MAX_DEC_STEPS);
    DecStep *st = &bpe->dec[bpe->n_dec++];
    memset(st, 0, sizeof *st);
    st->kind = (DecKind)kind;
    int len = 0;
    switch (st->kind) {
    case DEC_REPLACE:
        return string_pattern(r, x, where, &st->from, &st->from_len) ||
               string_field(r, x, where, "content", &st->to, &st->to_len) ? -1 : 0;
    case DEC_STRIP: {
        snprintf(field, sizeof field, "%s.content", where);
        if (one_char(r, hfr_get(x, "content"), field, st->ch, &len)) return -1;
        st->ch_len = (size_t)len;
        static const char *const ends[] = {"start", "stop"};
        int *vals[] = {&st->start, &st->stop};
        for (int i = 0; i < 2; i++) {
            const cJSON *v = hfr_get(x, ends[i]);
            snprintf(field, sizeof field, "%s.%s", where, ends[i]);
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 || v->valuedouble != (int)v->valuedouble)
                return hfr_fail(r, field, "is not a count of characters (an integer 0..1000000)");
            *vals[i] = (int)v->valuedouble;
        }
        return 0;
    }
    case DEC_METASPACE: {
        int prepend;
        if (read_metaspace(r, x, where, &prepend, st->ch, &len, NULL)) return -1;
        st->ch_len = (size_t)len;
        st->prepend_never = prepend == PREPEND_NEVER;
        return 0;
    }
    default:
        return 0;
    }
}

// Byte-level tokenizers decode their own way: null or ByteLevel. SentencePiece-style ones need their
// chain (tokenizers would join the raw token strings with spaces without one).
int hfr_read_decoder(Reader *r, const cJSON *dec) {
    const char *type = hfr_type(dec);
    if (!r->bpe->char_level) {
        if (!hfr_absent(dec) && !(type && strcmp(type, "ByteLevel") == 0))
            return hfr_fail(r, "decoder.type", "is %s%.40s%s: a byte-level tokenizer decodes with ByteLevel (or null)",
                            type ? "\"" : "", type ? type : "unknown", type ? "\"" : "");
        return 0;
    }
    if (hfr_absent(dec))
        return hfr_fail(r, "decoder", "is null: a tokenizer without a ByteLevel pre-tokenizer (SentencePiece-style) "
                        "needs its decoder (Metaspace, or Replace, ByteFallback, Fuse and Strip)");
    return read_dec_one(r, dec, "decoder");
}
