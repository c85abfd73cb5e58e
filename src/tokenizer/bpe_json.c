// Tokenizer files: bpe_load tells Hugging Face's tokenizer.json (a "model" object) from ctron's
// older vocabulary ({"type":"ctron-bpe",...}, see bpe.h), which is read here; bpe_save writes
// tokenizer.json (hf_tokenizer_write.c).
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include "tokenizer/bpe.h"
#include "tokenizer/hf_tokenizer.h"
#include "util/common.h"
#include "util/fileio.h"

#define BPE_FILE_TYPE "ctron-bpe"
#define BPE_FILE_VERSION 1
#define BPE_PRETOKENIZER "gpt2-bytes"

int bpe_save(const Bpe *bpe, const char *path, char *err, size_t errlen) {
    char *json = hf_tokenizer_write(bpe, err, errlen);
    if (!json) return -1;
    const void *parts[2] = {json, "\n"};
    size_t sizes[2] = {strlen(json), 1};
    int rc = fileio_write_atomic(path, parts, sizes, 2, err, errlen);
    cJSON_free(json);
    return rc;
}

// A JSON number that is an integer in [lo, hi], or -1 (callers pass lo >= 0).
static long json_int(const cJSON *x, long lo, long hi) {
    if (!cJSON_IsNumber(x)) return -1;
    double v = x->valuedouble;
    if (!isfinite(v) || v != floor(v) || v < (double)lo || v > (double)hi) return -1;
    return (long)v;
}

static int legacy_read(Bpe *bpe, const cJSON *root, const char *path, char *err, size_t errlen) {
    int rc = -1;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "type");
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(root, "vocab_size");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pretokenizer");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(root, "merges");
    long v = json_int(vocab, 256, BPE_LEGACY_MAX_VOCAB);
    if (!cJSON_IsString(type) || strcmp(type->valuestring, BPE_FILE_TYPE) != 0) {
        snprintf(err, errlen, "'%s': \"type\" is %s, expected \"%s\"", path,
                 cJSON_IsString(type) ? type->valuestring : "missing or not a string", BPE_FILE_TYPE);
    } else if (!cJSON_IsNumber(version)) {
        snprintf(err, errlen, "'%s': \"version\" is missing, expected %d", path, BPE_FILE_VERSION);
    } else if (version->valuedouble != BPE_FILE_VERSION) {
        snprintf(err, errlen, "'%s': unsupported \"version\" %g, expected %d", path, version->valuedouble,
                 BPE_FILE_VERSION);
    } else if (pre && (!cJSON_IsString(pre) || strcmp(pre->valuestring, BPE_PRETOKENIZER) != 0)) {
        snprintf(err, errlen, "'%s': \"pretokenizer\" is not \"%s\"", path, BPE_PRETOKENIZER);
    } else if (v < 0) {
        if (cJSON_IsNumber(vocab))
            snprintf(err, errlen, "'%s': \"vocab_size\" is %g, expected an integer in 256..%d", path,
                     vocab->valuedouble, BPE_LEGACY_MAX_VOCAB);
        else
            snprintf(err, errlen, "'%s': \"vocab_size\" is missing, expected an integer in 256..%d", path,
                     BPE_LEGACY_MAX_VOCAB);
    } else if (!cJSON_IsArray(merges)) {
        snprintf(err, errlen, "'%s': \"merges\" is %s, expected an array of vocab_size - 256 = %ld pairs", path,
                 merges ? "not an array" : "missing", v - 256);
    } else if (cJSON_GetArraySize(merges) != v - 256) {
        snprintf(err, errlen, "'%s': \"merges\" must be an array of vocab_size - 256 = %ld pairs, it has %d", path,
                 v - 256, cJSON_GetArraySize(merges));
    } else {
        int nm = (int)(v - 256), i = 0;
        int32_t (*m)[2] = xmalloc((size_t)(nm ? nm : 1) * sizeof *m);
        rc = 0;
        for (const cJSON *it = merges->child; it; it = it->next, i++) {
            long a = cJSON_GetArraySize(it) == 2 ? json_int(cJSON_GetArrayItem(it, 0), 0, BPE_LEGACY_MAX_VOCAB) : -1;
            long b = cJSON_GetArraySize(it) == 2 ? json_int(cJSON_GetArrayItem(it, 1), 0, BPE_LEGACY_MAX_VOCAB) : -1;
            if (!cJSON_IsArray(it) || a < 0 || b < 0) {
                snprintf(err, errlen, "'%s': merge %d is not a pair of token ids [a, b]", path, i);
                rc = -1;
                break;
            }
            m[i][0] = (int32_t)a;
            m[i][1] = (int32_t)b;
        }
        if (rc == 0) {
            char why[256];
            rc = bpe_from_merges(bpe, (const int32_t(*)[2])m, nm, why, sizeof why);
            if (rc) snprintf(err, errlen, "'%s': %s", path, why);
        }
        free(m);
    }
    return rc;
}

int bpe_load(Bpe *bpe, const char *path, char *err, size_t errlen) {
    memset(bpe, 0, sizeof *bpe);
    uint8_t *data;
    size_t n;
    if (fileio_read_all(path, &data, &n, err, errlen) != 0) return -1;
    cJSON *root = cJSON_ParseWithLength((const char *)data, n);
    free(data);
    int rc = -1;
    if (!cJSON_IsObject(root))
        snprintf(err, errlen, "'%s' is not a JSON object (expected a tokenizer.json or a ctron-bpe vocabulary)", path);
    else if (cJSON_GetObjectItemCaseSensitive(root, "model"))
        rc = hf_tokenizer_read(bpe, root, path, err, errlen);
    else
        rc = legacy_read(bpe, root, path, err, errlen);
    cJSON_Delete(root);
    return rc;
}
