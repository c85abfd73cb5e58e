#include "memory/lora_report.h"
#include "arch/lora.h"
#include "memory/ledger_report.h"

void lora_report_text(FILE *f, const MemoryConfig v[3]) {
    MemorySummary s[3];
    for (int i = 0; i < 3; i++) memory_summarize(&v[i], &s[i]);
    const ActShape *sh = &v[1].lay.sh;
    char targets[96], b[3][32];
    lora_describe_targets(sh->lora_sites, targets, sizeof targets);
    fprintf(f, "\nFine-tuning %s: full vs LoRA vs LoRA-FA (rank %d; targets %s), per rank of the first stage\n",
            v[0].name, sh->lora_rank, targets);
    int b16 = sh->base_bf16;
    fprintf(f, "  (frozen base: %s weights, no gradient, no AdamW state; activations as the ledger keeps them)\n",
            b16 ? "bf16 (--base-dtype bf16; full fine-tuning's fp32)" : "fp32");
    fprintf(f, "  %-34s %14s %14s %14s\n", "", "full", "LoRA", "LoRA-FA");
    fprintf(f, "  %-34s %14.4g %14.4g %14.4g\n", "trainable parameters", s[0].trainable, s[1].trainable, s[2].trainable);
    struct { const char *what; double x[3]; } rows[] = {
        {"activation peak of the step", {s[0].act.peak, s[1].act.peak, s[2].act.peak}},
        {"  of which its layers' (held)", {s[0].act.layers, s[1].act.layers, s[2].act.layers}},
        {b16 ? "weights (base 2 B, adapters 4 B)" : "weights (fp32, 4 B)", {s[0].param_bytes, s[1].param_bytes, s[2].param_bytes}},
        {"gradients (fp32, 4 B)", {s[0].grad_bytes, s[1].grad_bytes, s[2].grad_bytes}},
        {"AdamW m and v (fp32, 8 B)", {s[0].adam_bytes, s[1].adam_bytes, s[2].adam_bytes}},
        {"total per rank", {s[0].total_bytes, s[1].total_bytes, s[2].total_bytes}},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        fprintf(f, "  %-34s", rows[r].what);
        for (int i = 0; i < 3; i++) fprintf(f, " %14s", format_bytes(rows[r].x[i], b[i], sizeof b[i]));
        fprintf(f, "\n");
    }
    fprintf(f, "  %-34s %14s %13.2fx %13.2fx\n", "total: full / this", "1.00x", s[0].total_bytes / s[1].total_bytes,
            s[0].total_bytes / s[2].total_bytes);
    fprintf(f, "  %-34s %14s %14s %13.2fx\n", "activations: LoRA / LoRA-FA", "", "", s[1].act.peak / s[2].act.peak);
    fprintf(f, "  %-34s %14s %14s %13.2fx\n", "total: LoRA / LoRA-FA", "", "", s[1].total_bytes / s[2].total_bytes);
}
