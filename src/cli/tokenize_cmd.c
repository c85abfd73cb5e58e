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
#include "data/jsonl.h"
#include "data/tokenfile.h"
#include "tokenizer/bpe.h"
#include "util/common.h"
#include "util/fileio.h"

void cli_tokenize_usage(FILE *f) {
    fprintf(f,
        "usage: ctron tokenize train  --vocab N --in CORPUS --out tokenizer.json [--special TOKEN]...\n"
        "       ctron tokenize encode --tokenizer tokenizer.json --in FILE --out TOKENS.bin [--val-frac X] [--out-val FILE]\n"
        "                             [--jsonl] [--field NAME] [--doc-sep TOKEN]\n"
        "       ctron tokenize decode --tokenizer tokenizer.json --in TOKENS.bin --out FILE [--skip-special]\n"
        "\n"
        "  train   learn a byte-level BPE vocabulary (GPT-2's pre-tokenizer, 256 bytes + merges) and write it\n"
        "          as Hugging Face's tokenizer.json\n"
        "  encode  turn text or JSONL into a token file (llm.c format: 1024-byte header, then uint16 tokens,\n"
        "          or uint32 when the vocabulary has more than 65,536), the same ids as the `tokenizers` library\n"
        "  decode  turn a token file back into the bytes of its tokens\n"
        "\n"
        "options\n"
        "  --vocab N          train: vocabulary size, 256..%d (the special tokens included)\n"
        "  --special TOKEN    train: a special token (an added token, e.g. '<|endoftext|>'), after the learned\n"
        "                     tokens; never split, never learned from; repeat for more\n"
        "  --in FILE          the input file\n"
        "  --out FILE         the output file (written to FILE.tmp, then renamed; a FIFO or a device such\n"
        "                     as /dev/null is written in place)\n"
        "  --tokenizer FILE   encode, decode: a Hugging Face tokenizer.json (byte-level BPE: GPT-2's, Llama 3's,\n"
        "                     Qwen2's, one `ctron tokenize train` wrote, ...; SentencePiece-style BPE: Llama 2's,\n"
        "                     Mistral 7B's) or ctron's older vocabulary file\n"
        "  --jsonl            encode: --in is JSONL, one JSON object per line whose \"text\" is a document\n"
        "                     (the default for a name ending in .jsonl); blank lines are skipped\n"
        "  --field NAME       encode, JSONL: the field that holds the text (default text)\n"
        "  --doc-sep TOKEN    encode: an added token of the tokenizer put before every document (llm.c's GPT-2\n"
        "                     files put <|endoftext|> there). Each document also gets the BOS/EOS of the\n"
        "                     tokenizer's post-processor, as tokenizers' encode(text) does\n"
        "  --val-frac X       encode: the last X of the tokens (0 <= X < 1) go to a validation file\n"
        "                     (default 0: one file)\n"
        "  --out-val FILE     encode: the validation file (default: --out with _val before its extension,\n"
        "                     tokens.bin -> tokens_val.bin)\n"
        "  --skip-special     decode: leave out special tokens (what tokenizers' decode does by default)\n"
        "  -h, --help         this text\n"
        "\n"
        "A large input prints a progress line on stderr.\n", BPE_MAX_VOCAB);
}

#define usage_error(...) args_error("tokenize", __VA_ARGS__)

static int runtime_error(const char *msg) {
    fprintf(stderr, "ctron tokenize: error: %s\n", msg);
    return 1;
}

typedef enum { SUB_TRAIN, SUB_ENCODE, SUB_DECODE } Sub;
static const char *sub_name[] = {"train", "encode", "decode"};

#define MAX_SPECIAL 1024

typedef struct {
    Sub sub;
    int vocab;                // 0 = not given
    double val_frac;
    int val_frac_given;
    const char *in, *out, *out_val, *tokenizer;
    char *val_path;           // encode with --val-frac > 0: --out-val or the name derived from --out
    const char *special[MAX_SPECIAL];
    int n_special;
    int jsonl, skip_special;
    const char *field, *doc_sep;
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

enum { OPT_VOCAB = 1000, OPT_IN, OPT_OUT, OPT_TOKENIZER, OPT_VAL_FRAC, OPT_OUT_VAL, OPT_SPECIAL, OPT_JSONL, OPT_FIELD,
       OPT_DOC_SEP, OPT_SKIP_SPECIAL };

static int parse(int argc, char **argv, TokenizeOptions *o) {
    static const struct option opts[] = {
        {"vocab", required_argument, 0, OPT_VOCAB}, {"in", required_argument, 0, OPT_IN},
        {"out", required_argument, 0, OPT_OUT}, {"tokenizer", required_argument, 0, OPT_TOKENIZER},
        {"val-frac", required_argument, 0, OPT_VAL_FRAC}, {"out-val", required_argument, 0, OPT_OUT_VAL},
        {"special", required_argument, 0, OPT_SPECIAL}, {"jsonl", no_argument, 0, OPT_JSONL},
        {"field", required_argument, 0, OPT_FIELD}, {"doc-sep", required_argument, 0, OPT_DOC_SEP},
        {"skip-special", no_argument, 0, OPT_SKIP_SPECIAL}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
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
            // 256 bytes + merges + special tokens (token files switch to uint32 above 65,536)
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
        case OPT_SPECIAL:
            if (o->n_special == MAX_SPECIAL) return usage_error("--special: more than %d special tokens", MAX_SPECIAL);
            o->special[o->n_special++] = optarg;
            break;
        case OPT_JSONL: o->jsonl = 1; break;
        case OPT_FIELD: o->field = optarg; break;
        case OPT_DOC_SEP: o->doc_sep = optarg; break;
        case OPT_SKIP_SPECIAL: o->skip_special = 1; break;
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
    if (o->sub != SUB_TRAIN && o->n_special) return usage_error("--special is only for 'tokenize train', not '%s'", name);
    if (o->sub != SUB_ENCODE && (o->jsonl || o->field || o->doc_sep))
        return usage_error("%s is only for 'tokenize encode', not '%s'",
                           o->jsonl ? "--jsonl" : o->field ? "--field" : "--doc-sep", name);
    if (o->sub != SUB_DECODE && o->skip_special)
        return usage_error("--skip-special is only for 'tokenize decode', not '%s'", name);
    if (o->sub == SUB_ENCODE && o->in && jsonl_is_name(o->in)) o->jsonl = 1;
    if (o->field && !o->jsonl) return usage_error("--field names the text field of JSONL input: add --jsonl");
    if (o->field && !o->field[0]) return usage_error("--field: empty name");
    if (!o->field) o->field = "text";
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
    if (o->vocab < 256 + o->n_special) {
        free(text);
        return usage_error("--vocab %d leaves no room for 256 bytes and %d special tokens", o->vocab, o->n_special);
    }
    Bpe bpe;
    BpeTrainStats st;
    int rc = bpe_train(&bpe, text, n, o->vocab, o->special, o->n_special, &st, err, sizeof err);
    free(text);
    if (rc != 0) return usage_error("--special: %s", err);
    rc = bpe_save(&bpe, o->out, err, sizeof err);
    if (rc == 0) {
        printf("ctron tokenize train: %d tokens (%d merges, %d special) from %zu bytes, %zu pre-tokens (%zu distinct), "
               "%.2f s -> %s\n", bpe.vocab_size, bpe.n_merges, o->n_special, st.n_bytes, st.n_pretokens, st.n_unique,
               st.seconds, o->out);
        if (bpe.vocab_size < o->vocab)
            printf("  note: the corpus has no pair left to merge after %d merges; --vocab %d was not reached\n",
                   bpe.n_merges, o->vocab);
    }
    bpe_free(&bpe);
    return rc == 0 ? 0 : runtime_error(err);
}

// Progress on stderr for large inputs: a line rewritten in place on a terminal, one line every 10 s
// otherwise (a log).
typedef struct {
    size_t total;
    double t0, last;
    int tty;
} Progress;

#define PROGRESS_MIN_BYTES ((size_t)32 << 20)

static void progress_line(Progress *p, size_t done, size_t docs, size_t tokens, int final) {
    double now = now_seconds();
    if (!final && now - p->last < (p->tty ? 1.0 : 10.0)) return;
    p->last = now;
    double secs = now - p->t0 > 1e-9 ? now - p->t0 : 1e-9;
    fprintf(stderr, "%sctron tokenize encode: %5.1f%% (%.1f of %.1f MB), ", p->tty ? "\r" : "",
            p->total ? 100.0 * (double)done / (double)p->total : 100.0, (double)done / 1e6, (double)p->total / 1e6);
    if (docs) fprintf(stderr, "%zu documents, ", docs);
    fprintf(stderr, "%.2f M tokens, %.1f MB/s%s", (double)tokens / 1e6, (double)done / 1e6 / secs,
            p->tty && !final ? "" : "\n");
    fflush(stderr);
}

static void text_progress(void *ctx, size_t done, size_t tokens) { progress_line(ctx, done, 0, tokens, 0); }

static void jsonl_progress(void *ctx, size_t done, size_t total, size_t docs, size_t tokens) {
    (void)total;
    progress_line(ctx, done, docs, tokens, 0);
}

// --doc-sep's id: an added token of the tokenizer with exactly that text.
static int doc_sep_id(const Bpe *bpe, const char *text, int32_t *id) {
    for (int i = 0; i < bpe->n_added; i++)
        if (bpe->added[i].len == strlen(text) && memcmp(bpe->added[i].content, text, bpe->added[i].len) == 0) {
            *id = bpe->added[i].id;
            return 0;
        }
    return usage_error("--doc-sep: '%s' is not an added token of the tokenizer (it has %d added tokens%s)", text,
                       bpe->n_added, bpe->n_added ? "" : "; `ctron tokenize train --special TOKEN` makes one");
}

// The ids of --in: JSONL documents or one text document, with --doc-sep before each.
static int encode_input(const TokenizeOptions *o, const Bpe *bpe, int32_t sep, Progress *pg, int32_t **tok,
                        size_t *n_tok, size_t *n_in, size_t *n_docs) {
    char err[512];
    struct stat st;
    pg->total = stat(o->in, &st) == 0 ? (size_t)st.st_size : 0;
    int show = pg->total >= PROGRESS_MIN_BYTES;
    if (o->jsonl) {
        if (jsonl_encode(o->in, o->field, bpe, sep, show ? jsonl_progress : NULL, pg, tok, n_tok, n_docs, err,
                         sizeof err) != 0)
            return usage_error("--in: %s", err);
        *n_in = pg->total;
        if (show) progress_line(pg, *n_in, *n_docs, *n_tok, 1);
        return 0;
    }
    uint8_t *text;
    if (fileio_read_all(o->in, &text, n_in, err, sizeof err) != 0) return usage_error("--in: %s", err);
    size_t k;
    int32_t *ids = bpe_encode_doc_progress(bpe, text, *n_in, show ? text_progress : NULL, pg, &k);
    free(text);
    *n_docs = 1;
    *n_tok = k + (sep >= 0);
    *tok = xmalloc((*n_tok ? *n_tok : 1) * sizeof **tok);
    if (sep >= 0) (*tok)[0] = sep;
    memcpy(*tok + (sep >= 0), ids, k * sizeof *ids);
    free(ids);
    if (show) progress_line(pg, *n_in, 0, *n_tok, 1);
    return 0;
}

static int run_encode(const TokenizeOptions *o) {
    char err[512];
    Bpe bpe;
    if (bpe_load(&bpe, o->tokenizer, err, sizeof err) != 0) return usage_error("--tokenizer: %s", err);
    int32_t sep = -1, *tok = NULL;
    int rc = o->doc_sep ? doc_sep_id(&bpe, o->doc_sep, &sep) : 0;
    Progress pg = {0, now_seconds(), now_seconds(), isatty(2)};
    size_t n = 0, n_tok = 0, n_docs = 0;
    if (!rc) rc = encode_input(o, &bpe, sep, &pg, &tok, &n_tok, &n, &n_docs);
    int vocab = bpe.vocab_size;
    bpe_free(&bpe);
    if (rc) return rc;
    double secs = now_seconds() - pg.t0;
    // The validation split is the tail of the tokens, as `ctron train --val-frac` takes it.
    size_t n_val = (size_t)((double)n_tok * o->val_frac), n_train = n_tok - n_val;
    if (o->val_path && (n_val == 0 || n_train == 0))
        rc = usage_error("--val-frac %g leaves %s empty: '%s' encodes to %zu tokens", o->val_frac,
                         n_val == 0 ? "the validation file" : "the training file", o->in, n_tok);
    if (!rc && o->val_path && tokenfile_write(o->val_path, tok + n_train, n_val, vocab, err, sizeof err) != 0)
        rc = runtime_error(err);
    if (!rc && tokenfile_write(o->out, tok, n_train, vocab, err, sizeof err) != 0) rc = runtime_error(err);
    if (!rc) {
        printf("ctron tokenize encode: %zu bytes", n);
        if (o->jsonl) printf(" (%zu documents)", n_docs);
        printf(" -> %zu tokens (%.4f tokens/byte, uint%d), %.2f s -> %s", n_tok, n ? (double)n_tok / (double)n : 0.0,
               8 * tokenfile_token_bytes(vocab), secs, o->out);
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
    uint8_t *text = bpe_decode(&bpe, tok, n_tok, o->skip_special, &n, err, sizeof err);
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
