// ctron: a GPT trainer in C whose every saved activation is named and counted.
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/ckpt_cmd.h"
#include "cli/tokenize_cmd.h"
#include "cli/generate_cmd.h"
#include "cli/memory_cmd.h"
#include "cli/peak_cmd.h"
#include "cli/plan_cmd.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: ctron <command> [options]\n"
        "\n"
        "commands\n"
        "  train     train a GPT model (ctron train --help)\n"
        "  tokenize  learn a BPE vocabulary, encode text to a token file and back (ctron tokenize --help)\n"
        "  generate  continue a prompt from a checkpoint (ctron generate --help)\n"
        "  ckpt      verify a run's checkpoints: ctron ckpt verify DIR (ctron ckpt --help)\n"
        "  memory    activation memory, state and FLOPs of a model and layout (ctron memory --help)\n"
        "  plan      the cheapest recompute mix whose activations fit a memory budget (ctron plan --help)\n"
        "  peak      measure and cache this machine's fp32 GEMM peak (ctron peak --help)\n"
        "  help      this text\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return CTRON_EXIT_USAGE; }
    const char *cmd = argv[1];
    if (strcmp(cmd, "train") == 0) return cli_train_main(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return cli_tokenize_main(argc - 1, argv + 1);
    if (strcmp(cmd, "generate") == 0) return cli_generate_main(argc - 1, argv + 1);
    if (strcmp(cmd, "ckpt") == 0) return cli_ckpt_main(argc - 1, argv + 1);
    if (strcmp(cmd, "memory") == 0) return cli_memory_main(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0) return cli_plan_main(argc - 1, argv + 1);
    if (strcmp(cmd, "peak") == 0) return cli_peak_main(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) { usage(stdout); return 0; }
    fprintf(stderr, "ctron: unknown command '%s'\n", cmd);
    usage(stderr);
    return CTRON_EXIT_USAGE;
}
