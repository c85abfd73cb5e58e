// Directory operations behind atomic checkpoints: create, fsync, list, remove.
#ifndef CTRON_CKPT_FS_H
#define CTRON_CKPT_FS_H
#include <stddef.h>

// mkdir -p. Returns 0, or -1 with a message naming the path.
int fs_mkdir_p(const char *path, char *err, size_t errlen);
// fsync a directory so that the entries created or renamed in it are durable.
int fs_fsync_dir(const char *path, char *err, size_t errlen);
// The directory that holds path ("." for a bare name; trailing slashes ignored).
void fs_parent_dir(const char *path, char *out, size_t len);
// rm -r (best effort: what cannot be removed stays).
void fs_remove_tree(const char *path);
// Removes every entry of dir whose name starts with prefix.
void fs_remove_prefixed(const char *dir, const char *prefix);
// The steps N of the step_N directories in dir (digits only after "step_"), ascending, in a fresh
// array (*steps, free() it; never NULL). Returns how many, or -1 (errno set) when dir cannot be read.
int fs_list_steps(const char *dir, int **steps);
#endif
