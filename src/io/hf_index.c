#include "io/hf_index.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include "util/common.h"
#include "util/fileio.h"

enum { MAX_NAME = 95, MAX_FILE = 255 };   // a tensor name fits StTensor.name; a file name one path component

static char *dup_text(const char *s) {
    char *d = xmalloc(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

void hf_index_free(HfIndex *ix) {
    for (int i = 0; i < ix->n_shards; i++) free(ix->shards[i]);
    for (int i = 0; i < ix->n_tensors; i++) free(ix->names[i]);
    free(ix->shards);
    free(ix->names);
    free(ix->shard_of);
    memset(ix, 0, sizeof *ix);
}

// A shard is a file of the model directory itself: never a path that leaves it.
static int plain_file_name(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n <= MAX_FILE && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int add_shard(HfIndex *ix, const char *file) {
    for (int i = 0; i < ix->n_shards; i++)
        if (strcmp(ix->shards[i], file) == 0) return i;
    ix->shards[ix->n_shards] = dup_text(file);
    return ix->n_shards++;
}

int hf_index_parse(const char *text, size_t len, const char *path, HfIndex *ix, char *err, size_t errlen) {
    memset(ix, 0, sizeof *ix);
    cJSON *root = cJSON_ParseWithLength(text, len);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "'%s' is not %s", path, root ? "a JSON object" : "valid JSON");
    } else if (!cJSON_IsObject(map) || !map->child) {
        snprintf(err, errlen, "'%s': field 'weight_map' is %s, expected an object {tensor name: shard file}", path,
                 !map ? "missing" : cJSON_IsObject(map) ? "empty" : "not an object");
    } else {
        int n = cJSON_GetArraySize(map);
        ix->names = xcalloc(sizeof(char *) * (size_t)n);
        ix->shards = xcalloc(sizeof(char *) * (size_t)n);
        ix->shard_of = xcalloc(sizeof(int) * (size_t)n);
        rc = 0;
        for (const cJSON *e = map->child; e && rc == 0; e = e->next) {
            if (!e->string || strlen(e->string) == 0 || strlen(e->string) > MAX_NAME) {
                snprintf(err, errlen, "'%s': weight_map has a tensor name that is empty or longer than %d bytes", path,
                         MAX_NAME);
                rc = -1;
            } else if (!cJSON_IsString(e) || !plain_file_name(e->valuestring)) {
                snprintf(err, errlen, "'%s': weight_map entry '%s' is not a shard file name in the model directory "
                         "(a string without '/')", path, e->string);
                rc = -1;
            } else {
                ix->shard_of[ix->n_tensors] = add_shard(ix, e->valuestring);
                ix->names[ix->n_tensors++] = dup_text(e->string);
            }
        }
        if (rc == 0) {   // every tensor once (cJSON keeps a repeated key twice)
            char **sorted = xmalloc(sizeof(char *) * (size_t)ix->n_tensors);
            memcpy(sorted, ix->names, sizeof(char *) * (size_t)ix->n_tensors);
            qsort(sorted, (size_t)ix->n_tensors, sizeof(char *), cmp_names);
            for (int i = 1; i < ix->n_tensors && rc == 0; i++)
                if (strcmp(sorted[i - 1], sorted[i]) == 0) {
                    snprintf(err, errlen, "'%s': weight_map names tensor '%s' twice", path, sorted[i]);
                    rc = -1;
                }
            free(sorted);
        }
    }
    cJSON_Delete(root);
    if (rc != 0) hf_index_free(ix);
    return rc;
}

int hf_index_read(const char *path, HfIndex *ix, char *err, size_t errlen) {
    uint8_t *data;
    size_t n;
    memset(ix, 0, sizeof *ix);
    if (fileio_read_bounded(path, (size_t)64 << 20, &data, &n, err, errlen) != 0) return -1;
    int rc = hf_index_parse((const char *)data, n, path, ix, err, errlen);
    free(data);
    return rc;
}

int hf_index_find(const HfIndex *ix, const char *name) {
    for (int i = 0; i < ix->n_tensors; i++)
        if (strcmp(ix->names[i], name) == 0) return ix->shard_of[i];
    return -1;
}
