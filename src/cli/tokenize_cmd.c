#include "cli/tokenize_cmd.h"
#include "cli/args.h"
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "data/tokenfile.h"
#include "tokenizer/bpe.h"
#include "util/common.h"
#include "util/fileio.h"

void cli_tokenize_usage(FILE *f) {
    fprintf(f,
        "usage: ctron tokenize train  --vocab N --in CORPUS --out VOCAB.json\n"
        "       ctron tokenize encode --tokenizer VOCAB.json --in FILE --out TOKENS.bin [--val-frac X] [--out-val FILE]\n"
        "       ctron tokenize decode --tokenizer VOCAB.json --in TOKENS.bin --out FILE\n"
        "\n"
        "  train   learn a byte-level BPE vocabulary (GPT-2 pre-split, 256 bytes + N-256 merges)\n"
        "  encode  turn any file into a token file (llm.c format: 1024-byte header, uint16 tokens)\n"
        "  decode  turn a token file back into the exact bytes\n"
        "\n"
        "options\n"
        "  --vocab N          train: vocabulary size, 256..65536\n"
        "  --in FILE          the input file\n"
        "  --out FILE         the output file (written to FILE.tmp, then renamed; a FIFO or a device such\n"
        "                     as /dev/null is written in place)\n"
        "  --tokenizer FILE   encode, decode: a vocabulary from `ctron tokenize train`\n"
        "  --val-frac X       encode: the last X of the tokens (0 <= X < 1) go to a validation file\n"
        "                     (default 0: one file)\n"
        "  --out-val FILE     encode: the validation file (default: --out with _val before its extension,\n"
        "                     tokens.bin -> tokens_val.bin)\n"
        "  -h, --help         this text\n");
}

#define usage_error(...) args_error("tokenize", __VA_ARGS__)

static int runtime_error(const char *msg) {
    fprintf(stderr, "ctron tokenize: error: %s\n", msg);
    return 1;
}

typedef enum { SUB_TRAIN, SUB_ENCODE, SUB_DECODE } Sub;
static const char *sub_name[] = {"train", "encode", "decode"};

typedef struct {
    Sub sub;
    int vocab;                // 0 = not given
    double val_frac;
    int val_frac_given;
    const char *in, *out, *out_val, *tokenizer;
    char *val_path;           // encode with --val-frac > 0: --out-val or the name derived from --out
} TokenizeOptions;

// The input must be a readable regular file.
static int check_input(const char *flag, const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);   // a FIFO is refused below, never waited on for a writer
    if (fd < 0) return usage_error("%s: cannot read '%s': %s", flag, path, strerror(errno));
    struct stat st = {0};
    int ok = fstat(fd, &st) == 0;
    close(fd);
    if (!ok || !S_ISREG(st.st_mode))
        return usage_error("%s: '%s' is not a regular file (it is %s)", flag, path, fileio_kind(st.st_mode));
    return 0;
}

// The output's folder must exist and be writable (the file is created there as FILE.tmp).
static int check_output(const char *flag, const char *path) {
    if (path[0] == '\0') return usage_error("%s: empty file name", flag);
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) : 1;
    char *dir = xmalloc(dlen + 1);
    if (slash) memcpy(dir, path, dlen); else dir[0] = '.';
    if (slash && dlen == 0) dir[dlen++] = '/';   // "/file": the root
    dir[dlen] = '\0';
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = usage_error("%s: cannot write '%s': folder '%s' does not exist", flag, path, dir);
    else if (access(dir, W_OK) != 0)
        rc = usage_error("%s: cannot write '%s': folder '%s' is not writable", flag, path, dir);
    else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        rc = usage_error("%s: '%s' is a folder", flag, path);
    else {   // a FIFO or /dev/null is written in place, never renamed over; a block device is refused
        char err[1200];
        if (fileio_out_kind(path, err, sizeof err) == FILEIO_OUT_REFUSED) rc = usage_error("%s: %s", flag, err);
    }
    free(dir);
    return rc;
}

// tokens.bin -> tokens_val.bin; a name without an extension (or a dot file) gets _val appended.
static char *default_val_path(const char *out) {
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base) dot = out + strlen(out);
    size_t head = (size_t)(dot - out), len = strlen(out) + 5;
    char *p = xmalloc(len);
    snprintf(p, len, "%.*s_val%s", (int)head, out, dot);
    return p;
}

enum { OPT_VOCAB = 1000, OPT_IN, OPT_OUT, OPT_TOKENIZER, OPT_VAL_FRAC, OPT_OUT_VAL };

static int parse(int argc, char **argv, TokenizeOptions *o) {
    static const struct option opts[] = {
        {"vocab", required_argument, 0, OPT_VOCAB}, {"in", required_argument, 0, OPT_IN},
        {"out", required_argument, 0, OPT_OUT}, {"tokenizer", required_argument, 0, OPT_TOKENIZER},
        {"val-frac", required_argument, 0, OPT_VAL_FRAC}, {"out-val", required_argument, 0, OPT_OUT_VAL},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    if (argc < 2) return usage_error("missing subcommand: expected train, encode or decode");
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0) {
        cli_tokenize_usage(stdout);
        return -1;
    }
    int found = 0;
    for (int i = 0; i < 3; i++)
        if (strcmp(sub, sub_name[i]) == 0) { o->sub = (Sub)i; found = 1; }
    if (!found) return usage_error("unknown subcommand '%s': expected train, encode or decode", sub);
    argc--;
    argv++;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case OPT_VOCAB: {
            // 256 bytes + merges; token files store uint16, so at most BPE_MAX_VOCAB
            int rc = args_int("tokenize", "--vocab", optarg, 256, BPE_MAX_VOCAB, &o->vocab);
            if (rc) return rc;
            break;
        }
        case OPT_VAL_FRAC: {
            int rc = args_double("tokenize", "--val-frac", optarg, 0.0, 1.0, 1, &o->val_frac);
            if (rc) return rc;
            o->val_frac_given = 1;
            break;
        }
        case OPT_IN: o->in = optarg; break;
        case OPT_OUT: o->out = optarg; break;
        case OPT_TOKENIZER: o->tokenizer = optarg; break;
        case OPT_OUT_VAL: o->out_val = optarg; break;
        case 'h': cli_tokenize_usage(stdout); return -1;
        case ':': return usage_error("%s: missing value", flag);
        default: return usage_error("unknown option '%s'", flag);
        }
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);

    // Flags that belong to another subcommand are mistakes, not silently ignored.
    const char *name = sub_name[o->sub];
    if (o->sub != SUB_TRAIN && o->vocab) return usage_error("--vocab is only for 'tokenize train', not '%s'", name);
    if (o->sub == SUB_TRAIN && o->tokenizer)
        return usage_error("--tokenizer is not for 'tokenize train' (it writes the vocabulary to --out)");
    if (o->sub != SUB_ENCODE && (o->val_frac_given || o->out_val))
        return usage_error("%s is only for 'tokenize encode', not '%s'", o->out_val ? "--out-val" : "--val-frac",
                           name);
    if (o->out_val && o->val_frac == 0.0)
        return usage_error("--out-val needs --val-frac > 0 (the fraction of tokens it receives)");

    if (o->sub == SUB_TRAIN && !o->vocab) return usage_error("tokenize train: missing --vocab N");
    if (o->sub != SUB_TRAIN && !o->tokenizer) return usage_error("tokenize %s: missing --tokenizer FILE", name);
    if (!o->in) return usage_error("tokenize %s: missing --in FILE", name);
    if (!o->out) return usage_error("tokenize %s: missing --out FILE", name);
    int rc = check_input("--in", o->in);
    if (!rc && o->tokenizer) rc = check_input("--tokenizer", o->tokenizer);
    if (!rc) rc = check_output("--out", o->out);
    if (!rc && o->val_frac > 0.0) {
        o->val_path = o->out_val ? strdup(o->out_val) : default_val_path(o->out);
        if (!o->val_path) ctron_fatal("out of memory");
        if (strcmp(o->val_path, o->out) == 0)
            rc = usage_error("--out-val '%s' is the same file as --out", o->val_path);
        else
            rc = check_output("--out-val", o->val_path);
    }
    return rc;
}

static int run_train(const TokenizeOptions *o) {
    char err[512];
    uint8_t *text;
    size_t n;
    if (fileio_read_all(o->in, &text, &n, err, sizeof err) != 0) return usage_error("--in: %s", err);
    if (n == 0) { free(text); return usage_error("--in: '%s' is empty: there is nothing to learn from", o->in); }
    Bpe bpe;
    BpeTrainStats st;
    int rc = bpe_train(&bpe, text, n, o->vocab, &st, err, sizeof err);
    free(text);
    if (rc != 0) return runtime_error(err);
    rc = bpe_save(&bpe, o->out, err, sizeof err);
    if (rc == 0) {
        printf("ctron tokenize train: %d tokens (%d merges) from %zu bytes, %zu pre-tokens (%zu distinct), "
               "%.2f s -> %s\n", bpe.vocab_size, bpe.n_merges, st.n_bytes, st.n_pretokens, st.n_unique, st.seconds,
               o->out);
        if (bpe.vocab_size < o->vocab)
            printf("  note: the corpus has no pair left to merge after %d merges; --vocab %d was not reached\n",
                   bpe.n_merges, o->vocab);
    }
    bpe_free(&bpe);
    return rc == 0 ? 0 : runtime_error(err);
}

static int run_encode(const TokenizeOptions *o) {
    char err[512];
    Bpe bpe;
    if (bpe_load(&bpe, o->tokenizer, err, sizeof err) != 0) return usage_error("--tokenizer: %s", err);
    uint8_t *text;
    size_t n, n_tok;
    if (fileio_read_all(o->in, &text, &n, err, sizeof err) != 0) {
        bpe_free(&bpe);
        return usage_error("--in: %s", err);
    }
    double t0 = now_seconds();
    int32_t *tok = bpe_encode(&bpe, text, n, &n_tok);
    double secs = now_seconds() - t0;
    free(text);
    bpe_free(&bpe);
    // The validation split is the tail of the tokens, as `ctron train --val-frac` takes it.
    size_t n_val = (size_t)((double)n_tok * o->val_frac), n_train = n_tok - n_val;
    int rc = 0;
    if (o->val_path && (n_val == 0 || n_train == 0))
        rc = usage_error("--val-frac %g leaves %s empty: '%s' encodes to %zu tokens", o->val_frac,
                         n_val == 0 ? "the validation file" : "the training file", o->in, n_tok);
    if (!rc && o->val_path && tokenfile_write(o->val_path, tok + n_train, n_val, err, sizeof err) != 0)
        rc = runtime_error(err);
    if (!rc && tokenfile_write(o->out, tok, n_train, err, sizeof err) != 0) rc = runtime_error(err);
    if (!rc) {
        printf("ctron tokenize encode: %zu bytes -> %zu tokens (%.4f tokens/byte), %.2f s -> %s", n, n_tok,
               n ? (double)n_tok / (double)n : 0.0, secs, o->out);
        if (o->val_path) printf(" (%zu train) + %s (%zu validation)", n_train, o->val_path, n_val);
        printf("\n");
    }
    free(tok);
    return rc;
}

static int run_decode(const TokenizeOptions *o) {
    char err[512];
    Bpe bpe;
    if (bpe_load(&bpe, o->tokenizer, err, sizeof err) != 0) return usage_error("--tokenizer: %s", err);
    int32_t *tok;
    size_t n_tok, n;
    if (tokenfile_read(o->in, bpe.vocab_size, &tok, &n_tok, err, sizeof err) != 0) {
        bpe_free(&bpe);
        return usage_error("--in: %s", err);
    }
    uint8_t *text = bpe_decode(&bpe, tok, n_tok, &n, err, sizeof err);
    bpe_free(&bpe);
    free(tok);
    if (!text) return usage_error("--in: %s", err);   // not reached: tokenfile_read checked the ids
    const void *parts[1] = {text};
    size_t sizes[1] = {n};
    int rc = fileio_write_atomic(o->out, parts, sizes, 1, err, sizeof err);
    free(text);
    if (rc != 0) return runtime_error(err);
    printf("ctron tokenize decode: %zu tokens -> %zu bytes -> %s\n", n_tok, n, o->out);
    return 0;
}

int cli_tokenize_main(int argc, char **argv) {
    TokenizeOptions o;
    int rc = parse(argc, argv, &o);
    if (rc == 0) rc = o.sub == SUB_TRAIN ? run_train(&o) : o.sub == SUB_ENCODE ? run_encode(&o) : run_decode(&o);
    free(o.val_path);
    return rc == -1 ? 0 : rc;
}
