#include "cli/ckpt_cmd.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "io/checkpoint.h"
#include "io/ckpt_fs.h"
#include "io/ckpt_verify.h"

#define CMD "ckpt"

void cli_ckpt_usage(FILE *f) {
    fprintf(f,
        "usage: ctron ckpt verify DIR\n"
        "\n"
        "Verifies every checkpoint of a run directory DIR (or the one step_NNNNNNNN directory DIR): each\n"
        "file against checksums.txt (size and crc32), state.json, both safetensors files, the step in\n"
        "state.json, model.safetensors and optimizer.safetensors alike, every weight and moment finite\n"
        "and every second moment >= 0, BF16 tensors only in model.safetensors of a --base-dtype bf16 LoRA\n"
        "run (its frozen base), a step_N name that matches its step and is no symbolic link, and\n"
        "tokenizer.json as generate and --resume read it. Prints one line per checkpoint and the one\n"
        "`--resume DIR` takes (it skips each that fails, naming why).\n"
        "Exit 0 when all verify, 1 when one does not, 2 on a usage error.\n");
}

// One line for step_dir; 0 when it verifies.
static int verify_one(const char *step_dir) {
    char note[1200], err[1200];
    if (ckpt_verify(step_dir, note, sizeof note, err, sizeof err) != 0) {
        printf("%s: FAILED: %s\n", step_dir, err);
        return -1;
    }
    if (note[0]) printf("%s: ok (note: %s)\n", step_dir, note);
    else printf("%s: ok\n", step_dir);
    return 0;
}

static int verify_run(const char *dir) {
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/state.json", dir);
    if (stat(path, &sb) == 0) return verify_one(dir) == 0 ? 0 : 1;
    int *steps, n = fs_list_steps(dir, &steps), bad = 0, newest = -1;
    if (n < 0) {
        fprintf(stderr, "ctron ckpt: cannot read '%s': %s\n", dir, strerror(errno));
        free(steps);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        ckpt_step_dir(dir, steps[i], path, sizeof path);
        if (verify_one(path) == 0) newest = steps[i];
        else bad++;
    }
    if (n == 0) printf("%s holds no step_NNNNNNNN directory\n", dir);
    else if (newest < 0) printf("no checkpoint verifies: --resume %s would be refused\n", dir);
    else printf("%d of %d verify; --resume %s takes step %d\n", n - bad, n, dir, newest);
    free(steps);
    return bad || n == 0 ? 1 : 0;
}

int cli_ckpt_main(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        cli_ckpt_usage(stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "verify") != 0)
        return args_error(CMD, "expected a subcommand: verify DIR (got %s)", argc < 2 ? "nothing" : argv[1]);
    if (argc != 3) return args_error(CMD, "verify takes one directory (a run directory or a step_ directory)");
    struct stat sb;
    if (stat(argv[2], &sb) != 0) return args_error(CMD, "verify: cannot read '%s': %s", argv[2], strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return args_error(CMD, "verify: '%s' is not a directory", argv[2]);
    return verify_run(argv[2]);
}
