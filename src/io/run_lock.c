#include "io/run_lock.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/fileio.h"

// Takes the lock on an open descriptor; 0, -2 when held elsewhere, -1 on another error.
static int take(int fd, const char *path, char *err, size_t errlen) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno == EWOULDBLOCK) return -2;
    snprintf(err, errlen, "cannot lock '%s': %s", path, strerror(errno));
    return -1;
}

// The pid holding a flock on the file of fd, from /proc/locks ("1: FLOCK ADVISORY WRITE pid maj:min:ino ..."), or 0.
static long flock_holder(int fd) {
    struct stat sb;
    FILE *f = fopen("/proc/locks", "r");
    if (!f || fstat(fd, &sb) != 0) { if (f) fclose(f); return 0; }
    char line[256], kind[16];
    long pid, found = 0;
    unsigned long long ino;
    unsigned maj, min;
    while (!found && fgets(line, sizeof line, f))
        if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%llu", kind, &pid, &maj, &min, &ino) == 5 &&
            strcmp(kind, "FLOCK") == 0 && ino == (unsigned long long)sb.st_ino && pid != (long)getpid())
            found = pid;
    fclose(f);
    return found;
}

int run_lock_dir(const char *dir, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, RUN_LOCK_FILE);
    // O_NONBLOCK: a FIFO put there must be refused, not waited on (open would block for a reader).
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create the lock file '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "the lock file '%s' is %s, not a regular file: ctron keeps its run lock there; remove "
                 "it", path, fileio_kind(sb.st_mode));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int rc = take(fd, path, err, errlen);
    if (rc == -2) {   // the holder wrote its pid and host when it took the lock
        char who[160] = "";
        ssize_t n = pread(fd, who, sizeof who - 1, 0);
        who[n > 0 ? n : 0] = '\0';
        who[strcspn(who, "\n")] = '\0';
        snprintf(err, errlen, "'%s' is in use by another ctron run (%s, lock file '%s'); two runs must not share "
                 "a checkpoint directory", dir, who[0] ? who : "holder unknown", path);
    }
    if (rc != 0) { close(fd); return rc; }
    char host[128] = "?", who[200];
    gethostname(host, sizeof host - 1);
    int len = snprintf(who, sizeof who, "pid %ld host %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, who, (size_t)len, 0) != len) {
        snprintf(err, errlen, "cannot write the lock file '%s': %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int run_lock_holder(const char *dir, char *who, size_t wholen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, RUN_LOCK_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat sb;
    int held = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        ssize_t n = pread(fd, who, wholen - 1, 0);
        who[n > 0 ? n : 0] = '\0';
        who[strcspn(who, "\n")] = '\0';
        held = 1;
    }
    close(fd);
    return held;
}

int run_lock_file(const char *path, char *err, size_t errlen) {
    // A FIFO or device is written in place (never blocking on a FIFO nobody reads); a regular file is
    // created if missing and never truncated.
    int kind = fileio_out_kind(path, err, errlen), fd;
    if (kind == FILEIO_OUT_REFUSED) return -1;
    if (kind == FILEIO_OUT_IN_PLACE) {
        if ((fd = fileio_open_in_place(path, 1, err, errlen)) < 0) return -1;
    } else if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    int rc = take(fd, path, err, errlen);
    if (rc == -2) {
        char host[128] = "?";
        gethostname(host, sizeof host - 1);
        long pid = flock_holder(fd);
        if (pid > 0)
            snprintf(err, errlen, "'%s' is in use by another ctron run (pid %ld host %s); two runs must not write one "
                     "log", path, pid, host);
        else
            snprintf(err, errlen, "'%s' is in use by another process (its pid is not visible here: another host?); "
                     "two runs must not write one log", path);
    }
    if (rc != 0) { close(fd); return rc; }
    return fd;
}

void run_lock_release(int fd) {
    if (fd >= 0) close(fd);
}
