// model.safetensors.index.json, the map of a sharded Hugging Face checkpoint:
// {"metadata": {...}, "weight_map": {tensor name: shard file name}}. Only weight_map is read
// (metadata's total_size and transformers 5's total_parameters are not needed). Every shard is a
// plain file name inside the model directory (no '/', not '.' or '..'), every tensor is named once.
#ifndef CTRON_HF_INDEX_H
#define CTRON_HF_INDEX_H
#include <stddef.h>

typedef struct {
    int n_shards;
    char **shards;                // the distinct shard files, in the order the map first names them
    int n_tensors;
    char **names;                 // tensor names
    int *shard_of;                // names[i] is in shards[shard_of[i]]
} HfIndex;

// Parses the index's text (path names it in messages). 0, or -1 with err naming the file and the entry.
int hf_index_parse(const char *text, size_t len, const char *path, HfIndex *ix, char *err, size_t errlen);
int hf_index_read(const char *path, HfIndex *ix, char *err, size_t errlen);
// The shard holding tensor name, or -1.
int hf_index_find(const HfIndex *ix, const char *name);
void hf_index_free(HfIndex *ix);
#endif
