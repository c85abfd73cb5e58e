#include "data/jsonl.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/common.h"
#include "util/fileio.h"

int jsonl_is_name(const char *path) {
    size_t n = strlen(path);
    return n >= 6 && strcmp(path + n - 6, ".jsonl") == 0;
}

// 1 when a JSON text holds the escape \u0000 (cJSON would end the string there).
static int has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '\\') {
            if (s[i + 1] == 'u' && i + 5 < n && strncmp(s + i + 2, "0000", 4) == 0) return 1;
            i++;   // the escaped character
        }
    return 0;
}

static int blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

typedef struct {
    int32_t *v;
    size_t n, cap;
} Ids;

static void ids_append(Ids *ids, const int32_t *t, size_t k) {
    if (ids->n + k > ids->cap) {
        while (ids->n + k > ids->cap) ids->cap = ids->cap ? 2 * ids->cap : 1 << 16;
        ids->v = realloc(ids->v, ids->cap * sizeof *ids->v);
        if (!ids->v) ctron_fatal("out of memory for %zu token ids", ids->cap);
    }
    if (k) memcpy(ids->v + ids->n, t, k * sizeof *t);
    ids->n += k;
}

// One line's document appended to enc (through the tokenizer) or ids (bytes, enc NULL); -1 with a
// message (naming the line) when the line is bad.
static int encode_line(const char *path, size_t lineno, const char *line, size_t len, const char *field,
                       BpeEncoder *enc, int32_t doc_sep, Ids *ids, char *err, size_t errlen) {
    cJSON *obj = cJSON_ParseWithLength(line, len);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(obj, field);
    int rc = -1;
    if (!obj)
        snprintf(err, errlen, "'%s' line %zu: not JSON (near character %zu)", path, lineno,
                 (size_t)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - line + 1 : 1));
    else if (!cJSON_IsObject(obj))
        snprintf(err, errlen, "'%s' line %zu: not a JSON object (expected {\"%s\": \"...\"})", path, lineno, field);
    else if (!text)
        snprintf(err, errlen, "'%s' line %zu: no \"%s\" field", path, lineno, field);
    else if (!cJSON_IsString(text))
        snprintf(err, errlen, "'%s' line %zu: \"%s\" is not a string", path, lineno, field);
    else if (has_nul_escape(line, len))
        snprintf(err, errlen, "'%s' line %zu: the text holds \\u0000, which ctron's JSON reader (cJSON) cannot carry",
                 path, lineno);
    else
        rc = 0;
    if (rc == 0) {
        const uint8_t *s = (const uint8_t *)text->valuestring;
        size_t n = strlen(text->valuestring);
        if (enc) {
            if (doc_sep >= 0) bpe_encoder_push(enc, &doc_sep, 1);
            bpe_encoder_add(enc, s, n, 1, NULL, NULL);
        } else {
            if (doc_sep >= 0) ids_append(ids, &doc_sep, 1);
            for (size_t i = 0; i < n; i++) {
                int32_t b = s[i];
                ids_append(ids, &b, 1);
            }
        }
    }
    cJSON_Delete(obj);
    return rc;
}

int jsonl_encode(const char *path, const char *field, const Bpe *bpe, int32_t doc_sep, JsonlProgressFn progress,
                 void *ctx, int32_t **tokens, size_t *n, size_t *n_docs, char *err, size_t errlen) {
    *tokens = NULL;
    *n = *n_docs = 0;
    int fd = fileio_open_regular(path, err, errlen);
    if (fd < 0) return -1;
    struct stat st;
    size_t total = fstat(fd, &st) == 0 ? (size_t)st.st_size : 0;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    Ids ids = {0};
    BpeEncoder *enc = bpe ? bpe_encoder_new(bpe) : NULL;   // one cache of pieces for all documents
    char *line = NULL;
    size_t cap = 0, lineno = 0, done = 0, docs = 0;
    ssize_t len;
    int rc = 0;
    double last = now_seconds();
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        done += (size_t)len;
        if (blank(line, (size_t)len)) continue;
        rc = encode_line(path, lineno, line, (size_t)len, field, enc, doc_sep, &ids, err, errlen);
        docs++;
        if (progress && (docs & 255) == 0 && now_seconds() - last >= 1.0) {
            last = now_seconds();
            progress(ctx, done, total, docs, enc ? bpe_encoder_count(enc) : ids.n);
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "cannot read '%s' (after line %zu): %s", path, lineno, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    if (enc) {
        ids.v = bpe_encoder_take(enc, &ids.n);
        bpe_encoder_free(enc);
    }
    if (rc != 0) {
        free(ids.v);
        return -1;
    }
    if (!ids.v) ids.v = xmalloc(sizeof *ids.v);
    *tokens = ids.v;
    *n = ids.n;
    *n_docs = docs;
    return 0;
}
