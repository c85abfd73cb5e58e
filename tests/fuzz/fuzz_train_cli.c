// `ctron train` flags: the input is split at newlines into arguments; every combination is parsed
// into options or refused with exit code 2 and a message. Arguments with '/' are skipped, so the
// files a parse may create (--log, --ckpt-dir) stay in the scratch directory this runs in.
#include "cli/cli.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {   // inside the scratch directory (make fuzz passes -close_fd_mask=3 for quiet)
        char dir[128];
        if (chdir(fuzz_dir_of(fuzz_file(NULL, 0, "cwd"), dir, sizeof dir)) != 0) abort();
        init = 1;
    }
    if (size > 2048 || memchr(data, '/', size)) return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[66] = {"ctron-train"};
    int argc = 1;
    for (char *tok = strtok(text, "\n"); tok && argc < 65; tok = strtok(NULL, "\n")) argv[argc++] = tok;
    argv[argc] = NULL;
    TrainOptions o;
    int rc = cli_parse_train(argc, argv, &o, 1);
    if (rc != 0 && rc != -1 && rc != 2) abort();   // 0 (run), -1 (--help), 2 (usage error)
    free(text);
    return 0;
}
