// common/temporary.c: temporary names, their removal on SIGINT/SIGTERM and after dead processes
// (temporary.h). The signal handler may only call async-signal-safe functions, so folders are
// listed with the getdents64 system call rather than opendir.
#define _GNU_SOURCE
#include "common/temporary.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/error.h"

#define MAX_HELD 8
#define HELD_PATH 4096

static char held_path[MAX_HELD][HELD_PATH];
static volatile sig_atomic_t held[MAX_HELD];
static const int cleanup_signals[] = {SIGINT, SIGTERM};

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

int temporary_remove(const char* path) {
    if (unlink(path) == 0) return 0;
    if (errno != EISDIR && errno != EPERM) return -1;   // Linux says EISDIR, POSIX EPERM
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    static char buf[4096] __attribute__((aligned(8)));
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct linux_dirent64* d = (struct linux_dirent64*)(buf + off);
            off += d->d_reclen;
            if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..")) unlinkat(fd, d->d_name, 0);
        }
    }
    close(fd);
    return rmdir(path);
}

void temporary_remove_held(void) {
    for (int i = 0; i < MAX_HELD; i++) {
        if (held[i]) temporary_remove(held_path[i]);
    }
}

static void on_signal(int sig) {
    temporary_remove_held();
    signal(sig, SIG_DFL);
    raise(sig);
}

void temporary_hold(const char* tmp) {
    static int installed = 0;
    if (!installed) {
        installed = 1;
        atexit(temporary_remove_held);   // a program that dies leaves none either
        for (size_t i = 0; i < sizeof cleanup_signals / sizeof *cleanup_signals; i++) {
            struct sigaction old, sa = {0};
            if (sigaction(cleanup_signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) continue;
            sa.sa_handler = on_signal;
            sigemptyset(&sa.sa_mask);
            sigaction(cleanup_signals[i], &sa, NULL);
        }
    }
    if (strlen(tmp) >= HELD_PATH) return;
    for (int i = 0; i < MAX_HELD; i++) {
        if (held[i]) continue;
        memcpy(held_path[i], tmp, strlen(tmp) + 1);
        held[i] = 1;
        return;
    }
}

void temporary_release(const char* tmp) {
    for (int i = 0; i < MAX_HELD; i++) {
        if (held[i] && !strcmp(held_path[i], tmp)) held[i] = 0;
    }
}

// Removes DIR/BASE.tmpN for every N that is not a live process's id.
static void remove_stale(const char* path) {
    char dir[HELD_PATH];
    const char* slash = strrchr(path, '/');
    const char* base = slash ? slash + 1 : path;
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path + (slash == path)), path);
    else snprintf(dir, sizeof dir, ".");
    DIR* d = opendir(dir);
    if (!d) return;
    size_t base_len = strlen(base);
    struct dirent* e;
    while ((e = readdir(d))) {
        const char* n = e->d_name;
        if (strncmp(n, base, base_len) || strncmp(n + base_len, ".tmp", 4)) continue;
        char* end;
        long pid = strtol(n + base_len + 4, &end, 10);
        if (end == n + base_len + 4 || *end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   // alive, or not ours to know
        char stale[HELD_PATH];
        if (snprintf(stale, sizeof stale, "%s/%s", dir, n) < (int)sizeof stale) {
            temporary_remove(stale);
        }
    }
    closedir(d);
}

int temporary_name(const char* path, char* out, size_t len, char* err) {
    if (snprintf(out, len, "%s.tmp%ld", path, (long)getpid()) >= (int)len) {
        set_err(err, "%s: path too long", path);
        return -1;
    }
    remove_stale(path);
    return 0;
}
