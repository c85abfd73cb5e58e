// Checkpoints under mixed precision (issue 13): loading into a bf16 model that has already run a
// forward (its bf16 weight copy built from other weights) gives exactly what a fresh model loaded from
// the same checkpoint gives: ckpt_load marks the copy stale, so the next forward rebuilds it from
// the loaded fp32 masters. (The trainer loads before its first forward, so test_resume_bf16.sh alone
// would not see a load that forgot to.) And state.json's training.precision round-trips.
// Skipped (exit 77, reason printed) where oneDNN has no bf16 matmul on this CPU.
// usage: test_ckpt_bf16 DIR (scratch directory, created)
#include <string.h>
#include "backend/backend.h"
#include "backend/cpu/gemm_bf16.h"
#include "check.h"
#include "io/checkpoint.h"
#include "io/ckpt_state.h"
#include "model/gpt.h"
#include "model/policy.h"
#include "train/adamw.h"
#include "util/common.h"

static const GPTConfig CFG = {.layers = 2, .hidden = 32, .heads = 4, .seq = 16, .batch = 2, .vocab = 256, .dropout = 0.1f};

static void bf16_model(GPT *m, MemoryPolicy *pol, uint64_t seed) {
    char err[256];
    memset(pol, 0, sizeof *pol);
    pol->precision = PRECISION_BF16;
    pol->act_dtype = ACT_BF16;
    if (policy_build(pol, CFG.layers, "none", "uniform", 1, NULL, err, sizeof err) != 0) ctron_fatal("%s", err);
    gpt_init(m, &CFG, pol);
    gpt_init_weights(m, seed);
}

// Evaluation loss (no dropout, nothing kept): a function of the weights the GEMMs see.
static double eval_loss(GPT *m) {
    int32_t tok[16 * 2], tgt[16 * 2];
    for (int i = 0; i < 32; i++) { tok[i] = (i * 37 + 5) % 256; tgt[i] = (i * 13 + 1) % 256; }
    StepCtx ctx = {7, 1, 0, 0};
    return gpt_forward(m, tok, tgt, CFG.seq, CFG.batch, ctx, 1.0f);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "ckpt_bf16.d";
    char err[1024], step_dir[4096];

    // The checkpoint: weights of seed 5, saved from an fp32-master model (the file is fp32 either way).
    GPT src;
    MemoryPolicy psrc;
    bf16_model(&src, &psrc, 5);
    AdamW opt;
    adamw_init(&opt, src.be, src.n_params, 0.9f, 0.95f, 1e-8f, 0.1f);
    CkptState st;
    memset(&st, 0, sizeof st);
    st.step = 3;
    st.model = CFG;
    st.beta1 = 0.9f; st.beta2 = 0.95f; st.eps = 1e-8f; st.weight_decay = 0.1f;
    st.lr = 1e-3f; st.min_lr = 1e-4f; st.total_steps = 10; st.grad_accum = 1; st.clip = 1.0f; st.seed = 5;
    st.eval_batches = 1;
    st.precision = PRECISION_BF16;
    snprintf(st.data_path, sizeof st.data_path, "data/kjv.txt");
    CkptSaveOptions so = {0, 0, NULL, 0};
    CHECK(ckpt_save(dir, &src, &opt, &st, &so, err, sizeof err) == 0, "save: %s", err);
    ckpt_step_dir(dir, 3, step_dir, sizeof step_dir);

    // state.json records the precision; a state without it (memset: 0) is fp32.
    CkptState back;
    CHECK(ckpt_read_state(step_dir, &back, err, sizeof err) == 0 && back.precision == PRECISION_BF16,
          "training.precision bf16 read back as %d (%s)", back.precision, err);

    // A: a bf16 model of other weights (seed 9) that has run a forward, then loads the checkpoint.
    GPT a, c;
    MemoryPolicy pa, pc;
    bf16_model(&a, &pa, 9);
    double before = eval_loss(&a);
    CHECK(ckpt_load(step_dir, &a, NULL, NULL, err, sizeof err) == 0, "load into a used model: %s", err);
    double la = eval_loss(&a);
    // C: a fresh bf16 model loaded from the same checkpoint (its copy is made at its first forward).
    bf16_model(&c, &pc, 11);
    CHECK(ckpt_load(step_dir, &c, NULL, NULL, err, sizeof err) == 0, "load into a fresh model: %s", err);
    double lc = eval_loss(&c);
    double ls = eval_loss(&src);
    CHECK(memcmp(a.params, c.params, a.n_params * sizeof(float)) == 0, "the loaded fp32 masters differ");
    CHECK(la == lc, "loss after loading into a used model %.17g, into a fresh one %.17g: the bf16 copy was not rebuilt",
          la, lc);
    CHECK(la == ls, "loss after loading %.17g, of the model that saved %.17g", la, ls);
    CHECK(before != la, "the two weight sets give the same loss %.17g: the test would see nothing", before);
    printf("eval loss: seed 9 %.9g, after loading seed 5 %.9g (fresh model %.9g, saving model %.9g)\n", before / 32,
           la / 32, lc / 32, ls / 32);

    adamw_free(&opt);   // before src: its moments live on src's backend
    gpt_free(&a); gpt_free(&c); gpt_free(&src);
    policy_free(&pa); policy_free(&pc); policy_free(&psrc);
    return check_summary();
}
