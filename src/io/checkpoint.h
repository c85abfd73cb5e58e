// Checkpoints: DIR/step_NNNNNNNN/ holds model.safetensors (GPT-2 state-dict names, Hugging Face
// Conv1D orientation), optimizer.safetensors (AdamW m.<name>, v.<name>, same orientation) and
// state.json (step, model config, optimizer, schedule, data order, seed). docs/CHECKPOINTS.md is
// the format's reference.
//
// A save is atomic: everything goes to DIR/.tmp-step_NNNNNNNN, files and directory are fsync'ed,
// then the directory is renamed into place and DIR is fsync'ed. Only then are old checkpoints
// pruned. A reader only ever looks at step_* directories, so a run killed mid-save leaves the
// previous checkpoint intact.
#ifndef CTRON_CHECKPOINT_H
#define CTRON_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>
#include "model/gpt.h"
#include "train/adamw.h"

#define CKPT_FORMAT "ctron-checkpoint"
#define CKPT_FORMAT_VERSION 1

// Everything state.json records: what a resumed run needs besides the tensors to continue
// bitwise exactly. Data order and dropout masks are pure functions of (seed, step, sample), so
// the step and the seed are the whole data position and RNG state.
#define CKPT_MAX_OPTIONS 48
typedef struct {
    int step;                     // optimizer steps completed
    GPTConfig model;
    float beta1, beta2, eps, weight_decay;
    long adam_t;                  // AdamW steps taken (bias correction)
    float lr, min_lr;             // schedule, resolved (no "default" markers)
    int warmup, total_steps;
    int grad_accum;
    float clip;
    uint64_t seed;
    // Precision (backend/backend.h) the run trained under, training.precision. The tensors are fp32
    // master weights and AdamW state either way, so this is a record, not a format: a checkpoint
    // resumes under either precision. Written by every save; a state.json without it (older ctron)
    // reads as fp32, the only precision there was.
    int precision;
    double val_frac;
    char data_path[1024];
    char val_path[1024];          // --val-data: an explicit validation file ("" when val_frac splits)
    int data_order;               // DataOrder (data/dataset.h): random or sequential windows
    int save_every, keep;         // the run's checkpoint cadence (a resumed run keeps it by default)
    int eval_every, eval_batches; // and its evaluation settings (idem)
    // Reading: the checkpoint's tokenizer.json (the BPE vocabulary of its tokens, tokenizer/bpe.h),
    // or empty for byte-level tokens. Saving: ignored (see CkptSaveOptions.tokenizer_json).
    char tokenizer_path[1024];
    // state.json "options": the train options that change the numbers and have no section above
    // (memory and algorithm flags, the layout), as flag -> the text the command line takes; the
    // list is train/train_config.c's. Optional (absent in an older ctron's checkpoints: n_options 0).
    int n_options;
    char option_flag[CKPT_MAX_OPTIONS][32];
    char option_value[CKPT_MAX_OPTIONS][192];
} CkptState;

// DIR/step_NNNNNNNN (at least 8 digits).
void ckpt_step_dir(const char *dir, int step, char *out, size_t len);
// The checkpoint to read from path: path itself when it is a step directory (holds state.json),
// else the newest step_NNNNNNNN inside it that verifies (io/ckpt_verify.h: checksums, steps,
// values); each newer one skipped is named on stderr with the reason. Incomplete saves (.tmp-*)
// are never considered.
// run_dir (may be NULL) receives the directory that holds the step directories.
// Returns 0; -1 when there is no checkpoint to read (missing, not a directory, no step_ directory);
// -2 when there are checkpoints and none verifies (err says why).
int ckpt_resolve(const char *path, char *step_dir, size_t len, char *run_dir, size_t run_len, char *err,
                 size_t errlen);
// Reads and validates step_dir/state.json.
int ckpt_read_state(const char *step_dir, CkptState *st, char *err, size_t errlen);
// Loads the weights into m and, when opt is not NULL, the AdamW state into opt (and then also
// requires batch, dropout and the AdamW hyper-parameters to match). Everything is validated
// first: state.json, every tensor present with its shape and dtype, nothing unexpected. On any
// error nothing is changed and err names the file, tensor or field. st may be NULL.
int ckpt_load(const char *step_dir, GPT *m, AdamW *opt, CkptState *st, char *err, size_t errlen);

typedef struct {
    int keep;                     // keep the newest keep step directories (0: all)
    int crash_in_save;            // test hook: SIGKILL this process half way through model.safetensors
    // The BPE vocabulary file's bytes, saved as tokenizer.json (NULL: byte-level tokens). Bytes, not
    // a path: a resumed run's vocabulary may live in a step directory that --keep prunes.
    const void *tokenizer_json;
    size_t tokenizer_bytes;
} CkptSaveOptions;
// Writes DIR/step_<st->step> atomically (DIR is created if needed), then prunes. Returns 0, or -1
// with err filled (the previous checkpoints are untouched).
int ckpt_save(const char *dir, const GPT *m, const AdamW *opt, const CkptState *st, const CkptSaveOptions *so,
              char *err, size_t errlen);

// Test hook: CTRON_TEST_CRASH_IN_SAVE=N asks the N-th save of this process (counting from 1) to
// kill the process with SIGKILL after part of model.safetensors is written. 0 when unset.
int ckpt_test_crash_in_save(void);

// Weight matrices inside a block (c_attn, c_proj, c_fc) are Conv1D [in, out] in the file and
// [out, in] in ctron: they are transposed on save and on load.
int ckpt_is_conv1d(const ParamInfo *pi);
#endif
