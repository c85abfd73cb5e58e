// Whole-file reads and crash-safe writes, shared by the tokenizer, token files and the CLI.
#ifndef CTRON_FILEIO_H
#define CTRON_FILEIO_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Opens path for reading only if it is a regular file: a FIFO, device or directory is refused at
// once (never blocks). Returns the descriptor, or -1 with a message naming the file and its kind.
int fileio_open_regular(const char *path, char *err, size_t errlen);
// "a FIFO", "a directory", ... for a st_mode that is not a regular file.
const char *fileio_kind(unsigned mode);

// Reads all of path into a fresh buffer (*data, freed by the caller; never NULL, even for an
// empty file). Returns 0, or -1 with a message naming the file in err.
int fileio_read_all(const char *path, uint8_t **data, size_t *n, char *err, size_t errlen);
// The same for a file that may hold at most max bytes (a larger one is refused, naming both sizes).
int fileio_read_bounded(const char *path, size_t max, uint8_t **data, size_t *n, char *err, size_t errlen);

// Where an output file goes (docs/RELIABILITY.md): FILEIO_OUT_REPLACE when path does not exist or
// is a regular file (written to a temporary file and renamed over it); FILEIO_OUT_IN_PLACE for a
// FIFO or a character device (/dev/null: renaming over it would replace the node with a file);
// FILEIO_OUT_REFUSED for a directory, block device or socket, with err naming the file and its kind.
enum { FILEIO_OUT_REFUSED = -1, FILEIO_OUT_REPLACE = 0, FILEIO_OUT_IN_PLACE = 1 };
int fileio_out_kind(const char *path, char *err, size_t errlen);
// Opens an existing FIFO or character device for writing in place without blocking: a FIFO nobody
// reads is refused (ENXIO) instead of waited on. append: O_APPEND. Returns the descriptor (blocking
// again), or -1 with err.
int fileio_open_in_place(const char *path, int append, char *err, size_t errlen);
// fopen(path, "w" or "a") for outputs written in place (SVG plots, logs, diagnostics): refuses what
// fileio_out_kind refuses and never blocks on a FIFO without a reader. NULL with err on failure.
FILE *fileio_fopen_out(const char *path, int append, char *err, size_t errlen);

// Writes the n_parts buffers back to back to path atomically: they go to "path.tmp", are
// fsync'ed and renamed over path, so a reader sees the old file or the whole new one, never a
// prefix. A FIFO or character device at path is written in place instead (fileio_out_kind); a
// directory, block device or socket is refused. Returns 0, or -1 with a message in err (the
// temporary file is removed).
int fileio_write_atomic(const char *path, const void *const *parts, const size_t *sizes, int n_parts,
                        char *err, size_t errlen);
#endif
