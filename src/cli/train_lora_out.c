// ctron train --lora-out DIR: after the run, its final checkpoint's adapters as a peft adapter
// directory (io/peft_adapter.h), read back from the checkpoint just written — what is shared is what
// was saved. The base is recorded as the --init-from source when there is one.
#include <stdio.h>
#include "cli/train_run_dir.h"
#include "io/checkpoint.h"
#include "io/peft_adapter.h"

int cli_train_lora_out(const TrainOptions *o) {
    char step_dir[4096], err[2048];
    CkptState st;
    GPT m;
    int rc = ckpt_resolve(o->ckpt_dir, step_dir, sizeof step_dir, NULL, 0, err, sizeof err) == 0 &&
                     ckpt_read_state(step_dir, &st, err, sizeof err) == 0
                 ? 0
                 : -1;
    if (rc == 0) {
        gpt_init_params(&m, &st.model);
        rc = ckpt_load(step_dir, &m, NULL, NULL, err, sizeof err);
        if (rc == 0) rc = peft_write(&m, o->lora_out, o->init_from, err, sizeof err);
        gpt_free(&m);
    }
    if (rc != 0) {
        fprintf(stderr, "ctron train: --lora-out: %s\n", err);
        return 1;
    }
    printf("wrote the adapters of %s (rank %d) to %s: PeftModel.from_pretrained(base, '%s')\n", step_dir,
           st.model.lora_rank, o->lora_out, o->lora_out);
    return 0;
}
