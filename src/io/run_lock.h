// One writer per run: an exclusive flock on DIR/.lock (for --ckpt-dir) or on the --log file itself.
// The kernel drops a flock when its holder dies (SIGKILL included), so a crashed run never leaves a
// stale lock; the pid and host written into DIR/.lock only name the holder in the refusal.
#ifndef CTRON_RUN_LOCK_H
#define CTRON_RUN_LOCK_H
#include <stddef.h>

#define RUN_LOCK_FILE ".lock"

// Locks the run directory dir (which must exist): creates DIR/.lock, takes the lock without
// waiting and writes "pid P host H" into it. Returns the descriptor to keep open for the run, -2
// when another process holds it (err names its pid and host), or -1 on any other error (err names
// the file and strerror, e.g. Permission denied).
int run_lock_dir(const char *dir, char *err, size_t errlen);
// Locks the file path itself (created if missing, never truncated): the --log of a run. Same
// returns; the holder's pid comes from /proc/locks when the kernel shows it.
int run_lock_file(const char *path, char *err, size_t errlen);
// Is dir's lock held by another process? 1 with who ("pid P host H"), 0 when free or absent.
int run_lock_holder(const char *dir, char *who, size_t wholen);
// Releases (closes) a descriptor from run_lock_dir / run_lock_file; -1 is ignored.
void run_lock_release(int fd);
#endif
