// ctron: a GPT trainer in C whose every saved activation is named and counted.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/ckpt_cmd.h"
#include "cli/eval_cmd.h"
#include "cli/export_cmd.h"
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
        "  eval      loss and perplexity of a model (an HF directory or a checkpoint) on data (ctron eval --help)\n"
        "  export    write a checkpoint as a Hugging Face model directory (ctron export --help)\n"
        "  ckpt      verify a run's checkpoints: ctron ckpt verify DIR (ctron ckpt --help)\n"
        "  memory    activation memory, state and FLOPs of a model and layout (ctron memory --help)\n"
        "  plan      the cheapest recompute mix whose activations fit a memory budget (ctron plan --help)\n"
        "  peak      measure and cache this machine's fp32 GEMM peak (ctron peak --help)\n"
        "  help      this text\n");
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {{"train", cli_train_main},   {"tokenize", cli_tokenize_main}, {"generate", cli_generate_main},
                {"eval", cli_eval_main},     {"export", cli_export_main},
                {"ckpt", cli_ckpt_main},     {"memory", cli_memory_main},     {"plan", cli_plan_main},
                {"peak", cli_peak_main}};

// Output that never arrived is a failure (stdout on a full disk or /dev/full): exit 1 at the end, as
// for a failing --log, with the system's error, unless the command failed already.
static int check_stdout(int rc) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    fprintf(stderr, "ctron: error: writing to standard output failed: %s; what was printed is incomplete\n",
            errno ? strerror(errno) : "an earlier write failed");
    return rc == 0 ? 1 : rc;
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return CTRON_EXIT_USAGE; }
    const char *cmd = argv[1];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0) return check_stdout(commands[i].run(argc - 1, argv + 1));
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return check_stdout(0);
    }
    fprintf(stderr, "ctron: unknown command '%s'\n", cmd);
    usage(stderr);
    return CTRON_EXIT_USAGE;
}
