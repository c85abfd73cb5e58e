#include "cli/lora_args.h"
#include <stdio.h>
#include "arch/lora.h"

int lora_args_check(LoraFamily family, int rank, const char *targets, int fa, long h, long qw, long kvw, long f, unsigned *sites,
                    char *err, size_t errlen) {
    *sites = 0;
    if (rank <= 0) {
        if (targets || fa)
            return snprintf(err, errlen, "--%s without --lora-rank: LoRA needs a rank (e.g. --lora-rank 16)",
                            targets ? "lora-targets" : "lora-fa"), -1;
        return 0;
    }
    unsigned mask = lora_family_sites(family);
    if (targets && lora_parse_targets(family, targets, &mask, err, errlen) != 0) return -1;
    for (int s = 0; s < LORA_SITES; s++) {   // the rank cannot exceed the adapted linear's smaller side
        if (!(mask >> s & 1u)) continue;
        const LoraSiteRow *row = lora_site((LoraSite)s);
        long in = lora_width(row->in, h, qw, kvw, f), out = lora_width(row->out, h, qw, kvw, f), lim = in < out ? in : out;
        if (rank > lim)
            return snprintf(err, errlen, "--lora-rank %d is above the width of target '%s' ([%ld, %ld]: at most %ld)",
                            rank, row->target, out, in, lim), -1;
    }
    *sites = mask;
    return 0;
}
