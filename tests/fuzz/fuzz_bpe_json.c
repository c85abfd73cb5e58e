// Tokenizer JSON (ctron tokenize's vocabulary file): bpe_load validates; a loaded vocabulary must
// encode and decode text without fault.
#include "fuzz_input.h"
#include "tokenizer/bpe.h"
#include "tokenizer/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "tokenizer.json");
    char err[512];
    Bpe bpe;
    if (bpe_load(&bpe, path, err, sizeof err) != 0) return 0;
    static const char text[] = "In the beginning God created the heaven and the earth.\n";
    size_t n = 0;
    int32_t *ids = text_encode(&bpe, text, sizeof text - 1, &n);
    FILE *null = fopen("/dev/null", "w");
    for (size_t i = 0; i < n; i++) text_write_token(&bpe, ids[i], null);
    fclose(null);
    free(ids);
    bpe_free(&bpe);
    return 0;
}
