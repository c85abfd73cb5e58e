// ctron: a GPT trainer in C whose every saved activation is named and counted.
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: ctron <command> [options]\n"
        "\n"
        "commands\n"
        "  train     train a GPT model (ctron train --help)\n"
        "  help      this text\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return CTRON_EXIT_USAGE; }
    const char *cmd = argv[1];
    if (strcmp(cmd, "train") == 0) return cli_train_main(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) { usage(stdout); return 0; }
    fprintf(stderr, "ctron: unknown command '%s'\n", cmd);
    usage(stderr);
    return CTRON_EXIT_USAGE;
}
