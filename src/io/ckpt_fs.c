#include "io/ckpt_fs.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/common.h"

int fs_mkdir_p(const char *path, char *err, size_t errlen) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        snprintf(err, errlen, "path '%.64s...' is too long", path);
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        int end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            struct stat sb;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                snprintf(err, errlen, "cannot create directory '%s': %s", buf, strerror(errno));
                return -1;
            }
            if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                snprintf(err, errlen, "'%s' exists and is not a directory", buf);
                return -1;
            }
            if (end) break;
            *p = '/';
        }
    }
    return 0;
}

int fs_fsync_dir(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        snprintf(err, errlen, "cannot sync directory '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

void fs_parent_dir(const char *path, char *out, size_t len) {
    snprintf(out, len, "%s", path);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') out[--n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, len, ".");
    else if (slash == out) out[1] = '\0';
    else *slash = '\0';
}

void fs_remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            char child[4096];
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
                snprintf(child, sizeof child, "%s/%s", path, e->d_name);
                fs_remove_tree(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

void fs_remove_prefixed(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t plen = strlen(prefix);
    char path[4096];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, plen) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        fs_remove_tree(path);   // removing entries while reading the directory is allowed by POSIX
    }
    closedir(d);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int fs_list_steps(const char *dir, int **steps) {
    int n = 0, cap = 16;
    *steps = malloc((size_t)cap * sizeof(int));   // plain malloc: it may grow with realloc
    if (!*steps) ctron_fatal("out of memory");
    DIR *d = opendir(dir);
    if (!d) return -1;   // errno says why (EACCES, ENOENT, ...)
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strncmp(name, "step_", 5) != 0 || name[5] == '\0') continue;
        long v = 0;
        int ok = 1;
        for (const char *c = name + 5; *c && ok; c++) {
            ok = *c >= '0' && *c <= '9';
            v = v * 10 + (*c - '0');
            ok = ok && v <= INT_MAX;
        }
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (!ok || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (n == cap) {
            cap *= 2;
            int *grown = realloc(*steps, (size_t)cap * sizeof(int));
            if (!grown) ctron_fatal("out of memory");
            *steps = grown;
        }
        (*steps)[n++] = (int)v;
    }
    closedir(d);
    qsort(*steps, (size_t)n, sizeof(int), cmp_int);
    return n;
}
