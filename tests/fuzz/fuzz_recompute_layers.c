// --recompute-layers LIST (e.g. 0-3:full,4-11:selective,12:memo,13:memo@0.25) and the other policy words:
// parsed into a plan that covers every layer exactly once (a memo layer's own α in [0, 1], no other layer
// with one), or refused with a message.
#include "fuzz_input.h"
#include "model/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    int layers = 1 + data[0] % 64;
    char err[512];
    MemoryPolicy p;
    memset(&p, 0, sizeof p);
    if (policy_build(&p, layers, "none", "uniform", 1, text, err, sizeof err) == 0) {
        for (int l = 0; l < layers; l++) {
            if (p.kind[l] < RECOMPUTE_NONE || p.kind[l] > RECOMPUTE_MEMO) abort();
            if (p.group_start[l] < 0 || p.group_start[l] > l) abort();
            float a = p.alpha[l];
            if (a != -1.0f && (p.kind[l] != RECOMPUTE_MEMO || !(a >= 0.0f && a <= 1.0f))) abort();
        }
        char plan[256];
        policy_describe(&p, plan, sizeof plan);
    }
    policy_free(&p);
    MaskMode mm;
    ActDtype dt;
    (void)policy_parse_masks(text, &mm);
    (void)policy_parse_dtype(text, &dt);
    free(text);
    return 0;
}
