// Peak resident memory of importing a Hugging Face model directory (issue 26): builds the model of its
// config.json, fills it with hf_load_into, and prints the peak RSS (getrusage) beside the fp32 model's
// and the files' sizes. --device cpu builds the model on the CPU backend (what eval and the one-process
// trainer do: tensors staged through one tensor's host buffer); default, a host model (gpt_init_params:
// export, and the whole copy a sharded layout is cut from).
// usage: hf_import_rss DIR [--device cpu]   (make a model with bench/hf_make_big.py)
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include "io/hf_load.h"
#include "util/common.h"

static double peak_gib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0 / 1073741824.0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [--device cpu]\n", argv[0]);
        return 2;
    }
    int device = argc > 3 && strcmp(argv[2], "--device") == 0;
    char err[2048];
    HfConfig hc;
    if (hf_dir_config(argv[1], &hc, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 2; }
    GPTConfig cfg = {.seq = 16, .batch = 1};
    if (hf_config_apply(&hc, &cfg, argv[1], err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 2; }
    GPT m;
    double before = peak_gib(), t0 = now_seconds();
    if (device) gpt_init(&m, &cfg, NULL);
    else gpt_init_params(&m, &cfg);
    int rc = hf_load_into(&m, argv[1], err, sizeof err);
    double secs = now_seconds() - t0;
    if (rc != 0) { fprintf(stderr, "%s\n", err); return 2; }
    double model = (double)m.n_params * 4 / 1073741824.0;
    printf("%s: %zu parameters (fp32 %.2f GiB%s) imported in %.1f s; peak RSS %.2f GiB (%.2f before the model), "
           "%.2f x the fp32 model\n", argv[1], m.n_params, model,
           device ? ", plus gradients on the CPU backend" : "", secs, peak_gib(), before, peak_gib() / model);
    gpt_free(&m);
    return 0;
}
