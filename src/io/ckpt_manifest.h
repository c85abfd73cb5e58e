// A checkpoint's checksums: step_N/checksums.txt lists every file of the step directory with its
// size and zlib crc32, written last (inside the temporary directory, before the rename that makes
// the checkpoint visible). One line per file:
//     crc32 <8 hex digits> <size in bytes> <file name>
// after a first line "# ctron checkpoint checksums v1". Names are plain (no '/', no leading '.').
#ifndef CTRON_CKPT_MANIFEST_H
#define CTRON_CKPT_MANIFEST_H
#include <stddef.h>
#include <stdint.h>

#define CKPT_MANIFEST_FILE "checksums.txt"
#define CKPT_MANIFEST_HEADER "# ctron checkpoint checksums v1"
#define CKPT_MANIFEST_MAX 16

typedef struct {
    char name[64];
    uint32_t crc;
    uint64_t size;
} CkptSum;

typedef struct {
    CkptSum e[CKPT_MANIFEST_MAX];
    int n;
} CkptManifest;

// crc32 and size of a regular file (a FIFO is refused). 0, or -1 with err naming the file.
int ckpt_file_crc(const char *path, uint32_t *crc, uint64_t *size, char *err, size_t errlen);
// Writes dir/checksums.txt for the files names[0..n) of dir (atomically). 0, or -1 with err.
int ckpt_manifest_write(const char *dir, const char *const *names, int n, char *err, size_t errlen);
// Parses manifest text (what the file holds; path only names it in messages). 0, or -1 with err
// naming the line.
int ckpt_manifest_parse(const char *text, size_t n, const char *path, CkptManifest *m, char *err, size_t errlen);
// Reads dir/checksums.txt: 0, 1 when there is none (a checkpoint of an older ctron, or made by
// hand), or -1 with err.
int ckpt_manifest_read(const char *dir, CkptManifest *m, char *err, size_t errlen);
// The entry for name, or NULL.
const CkptSum *ckpt_manifest_find(const CkptManifest *m, const char *name);
// Checks the size and crc32 of every listed file. 0, or -1 with err naming the file and what differs.
int ckpt_manifest_verify(const char *dir, const CkptManifest *m, char *err, size_t errlen);
#endif
