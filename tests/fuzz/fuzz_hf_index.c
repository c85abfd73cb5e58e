// model.safetensors.index.json (a sharded Hugging Face checkpoint): hf_index_read refuses a malformed
// map, a shard outside the model directory and a tensor named twice; what it accepts is consistent.
#include <string.h>
#include "fuzz_input.h"
#include "io/hf_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "model.safetensors.index.json");
    char err[512];
    HfIndex ix;
    if (hf_index_read(path, &ix, err, sizeof err) != 0) {
        if (!err[0]) abort();
        return 0;
    }
    if (ix.n_tensors < 1 || ix.n_shards < 1 || ix.n_shards > ix.n_tensors) abort();
    for (int i = 0; i < ix.n_shards; i++)
        if (strchr(ix.shards[i], '/') || !strcmp(ix.shards[i], "..") || !strcmp(ix.shards[i], ".") || !ix.shards[i][0])
            abort();
    for (int i = 0; i < ix.n_tensors; i++)
        if (ix.shard_of[i] < 0 || ix.shard_of[i] >= ix.n_shards || hf_index_find(&ix, ix.names[i]) != ix.shard_of[i])
            abort();
    hf_index_free(&ix);
    return 0;
}
