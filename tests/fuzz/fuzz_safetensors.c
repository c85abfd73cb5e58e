// safetensors files (checkpoints, Hugging Face weights): the strict reader must turn every
// malformed header, offset or shape into a message; what it accepts must be self-consistent.
#include "fuzz_input.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "model.safetensors");
    char err[512];
    StFile f;
    st_init(&f);
    if (st_read(&f, path, err, sizeof err) == 0) {
        for (int i = 0; i < f.n; i++) {
            const StTensor *t = &f.t[i];
            size_t elems = 1;
            for (int d = 0; d < t->ndim; d++) elems *= (size_t)t->shape[d];
            if (elems * st_dtype_size(t->dtype) != t->nbytes) abort();   // the reader checked this
            uint8_t sum = 0;   // every byte the reader points at is readable
            for (size_t b = 0; b < t->nbytes; b++) sum ^= ((const uint8_t *)t->data)[b];
            if (sum == 0 && t->nbytes == 1 && ((const uint8_t *)t->data)[0] != 0) abort();
            if (st_find(&f, t->name) == NULL) abort();
        }
        for (int i = 0; i < f.n_meta; i++) (void)st_meta(&f, f.meta_keys[i]);
    }
    st_free(&f);
    return 0;
}
