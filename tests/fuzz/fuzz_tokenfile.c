// Token files (llm.c's format): the sniffer and the reader must reject any malformed header or
// length with a message, never read out of bounds.
#include "data/tokenfile.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "tokens.bin");
    char err[512];
    if (tokenfile_sniff(path, err, sizeof err) == 1) {
        int32_t *tokens = NULL;
        size_t n = 0;
        if (tokenfile_read(path, 50304, &tokens, &n, err, sizeof err) == 0) {
            for (size_t i = 0; i < n; i++)
                if (tokens[i] < 0 || tokens[i] >= 50304) abort();   // the reader promised a range check
            free(tokens);
        }
    }
    return 0;
}
