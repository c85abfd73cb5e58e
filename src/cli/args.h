// Flag parsing helpers shared by the subcommands: every bad value is a usage error (exit 2) whose
// message names the command, the flag, the value and what was expected.
#ifndef CTRON_ARGS_H
#define CTRON_ARGS_H

// Prints "ctron CMD: message\n(see ctron CMD --help)" to stderr; returns CTRON_EXIT_USAGE.
int args_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Integer in lo..hi; returns 0 or the usage-error exit code.
int args_int(const char *cmd, const char *flag, const char *text, long lo, long hi, int *out);
// Number in lo..hi (hi excluded when hi_open); returns 0 or the usage-error exit code.
int args_double(const char *cmd, const char *flag, const char *text, double lo, double hi, int hi_open, double *out);
// A size in bytes (6GiB, 512MiB, 2e9: memory/planner.h's parse_bytes) in lo..hi bytes; the message
// gives the range. Returns 0 or the usage-error exit code.
int args_bytes(const char *cmd, const char *flag, const char *text, double lo, double hi, double *out);
#endif
