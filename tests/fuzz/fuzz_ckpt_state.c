// A checkpoint's state.json (the run's configuration for --resume): every field validated with a
// message naming it, whatever the JSON holds.
#include "fuzz_input.h"
#include "io/ckpt_state.h"
#include "backend/backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "state.json");
    char err[1024];
    CkptState st;
    if (ckpt_state_read(path, &st, err, sizeof err) == 0) {
        if (st.model.layers < 1 || st.model.hidden < 1 || st.model.heads < 1 || st.model.seq < 1) abort();
        if (memchr(st.data_path, '\0', sizeof st.data_path) == NULL) abort();
        // training.precision is optional (fp32 when absent) and otherwise one of the two names.
        if (st.precision != PRECISION_FP32 && st.precision != PRECISION_BF16) abort();
    }
    return 0;
}
