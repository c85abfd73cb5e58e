// `ctron tokenize train|encode|decode`: learn a BPE vocabulary, turn text into a token file and back.
#ifndef CTRON_TOKENIZE_CMD_H
#define CTRON_TOKENIZE_CMD_H
#include <stdio.h>

void cli_tokenize_usage(FILE *f);
// argv[0] is "tokenize". Returns the exit code: 0, 2 on a usage error (a bad flag, or an input
// file that is missing or malformed; the message is printed), 1 when writing the output fails.
int cli_tokenize_main(int argc, char **argv);
#endif
