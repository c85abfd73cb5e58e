// Whole-file reads and crash-safe writes, shared by the tokenizer, token files and the CLI.
#ifndef CTRON_FILEIO_H
#define CTRON_FILEIO_H
#include <stddef.h>
#include <stdint.h>

// Opens path for reading only if it is a regular file: a FIFO, device or directory is refused at
// once (never blocks). Returns the descriptor, or -1 with a message naming the file and its kind.
int fileio_open_regular(const char *path, char *err, size_t errlen);
// "a FIFO", "a directory", ... for a st_mode that is not a regular file.
const char *fileio_kind(unsigned mode);

// Reads all of path into a fresh buffer (*data, freed by the caller; never NULL, even for an
// empty file). Returns 0, or -1 with a message naming the file in err.
int fileio_read_all(const char *path, uint8_t **data, size_t *n, char *err, size_t errlen);

// Writes the n_parts buffers back to back to path atomically: they go to "path.tmp", are
// fsync'ed and renamed over path, so a reader sees the old file or the whole new one, never a
// prefix. Returns 0, or -1 with a message in err (the temporary file is removed).
int fileio_write_atomic(const char *path, const void *const *parts, const size_t *sizes, int n_parts,
                        char *err, size_t errlen);
#endif
