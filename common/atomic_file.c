// common/atomic_file.c: writing a file through a temporary sibling and a rename (atomic_file.h).
#define _GNU_SOURCE   // renameat2
#include "common/atomic_file.h"

#include <fcntl.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/temporary.h"

#define PATH_BYTES 4096
#define MAX_LINKS 40

// The path that path names once every symbolic link on it is followed, existing or not.
static int resolve(const char* path, char* out, char* err) {
    if (snprintf(out, PATH_BYTES, "%s", path) >= PATH_BYTES) {
        set_err(err, "%s: path too long", path);
        return -1;
    }
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
        char link[PATH_BYTES];
        ssize_t n = readlink(out, link, sizeof link - 1);
        if (hops == MAX_LINKS || n < 0) {
            set_err(err, "%s: cannot follow the symbolic link: %s", path,
                    n < 0 ? strerror(errno) : "too many levels");
            return -1;
        }
        link[n] = 0;
        char* slash = strrchr(out, '/');
        size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - out + 1);
        if (keep + (size_t)n >= PATH_BYTES) {
            set_err(err, "%s: path too long", path);
            return -1;
        }
        memcpy(out + keep, link, (size_t)n + 1);
    }
}

// Whether target exists and is something other than a regular file; -1 with err for a directory.
static int is_special(const char* target, const char* path, char* err) {
    struct stat st;
    if (stat(target, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    if (S_ISDIR(st.st_mode)) {
        set_err(err, "%s: is a directory", path);
        return -1;
    }
    return 1;
}

int atomic_check(const char* path, char* err) {
    char target[PATH_BYTES], dir[PATH_BYTES];
    if (resolve(path, target, err) != 0) return -1;
    int special = is_special(target, path, err);
    if (special < 0) return -1;
    const char* slash = strrchr(target, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - target + (slash == target)) : 1,
             slash ? target : ".");
    const char* what = special ? target : dir;
    if (access(what, special ? W_OK : W_OK | X_OK) != 0) {
        set_err(err, "%s: cannot write %s: %s", path, what, strerror(errno));
        return -1;
    }
    return 0;
}

FILE* atomic_open(const char* path, char* tmp, size_t tmp_len, char* err) {
    char target[PATH_BYTES];
    if (resolve(path, target, err) != 0) return NULL;
    int special = is_special(target, path, err);
    if (special < 0) return NULL;
    if (special) {
        tmp[0] = 0;
        FILE* f = fopen(target, "wb");
        if (!f) set_err(err, "%s: cannot open for writing: %s", path, strerror(errno));
        return f;
    }
    if (temporary_name(target, tmp, tmp_len, err) != 0) return NULL;
    FILE* f = fopen(tmp, "wb");
    if (!f) set_err(err, "%s: cannot create: %s", tmp, strerror(errno));
    else temporary_hold(tmp);
    return f;
}

int atomic_close(FILE* f, const char* tmp, const char* path, int ok, char* err) {
    int in_place = !*tmp;
    // A device or a FIFO cannot be synced, and need not be.
    ok = ok && fflush(f) == 0 && (in_place || fsync(fileno(f)) == 0);
    int write_errno = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        write_errno = errno;
    }
    const char* written = in_place ? path : tmp;
    if (!ok) set_err(err, "%s: write failed: %s", written, strerror(write_errno));
    if (in_place) return ok ? 0 : -1;
    char target[PATH_BYTES];
    if (ok && resolve(path, target, err) != 0) ok = 0;
    if (ok && is_special(target, path, err) != 0) {
        set_err(err, "%s: no longer a regular file; the new content is not renamed over it", path);
        ok = 0;
    }
    if (ok && rename(tmp, target) != 0) {
        set_err(err, "%s: cannot rename to %s: %s", tmp, target, strerror(errno));
        ok = 0;
    }
    if (!ok) remove(tmp);
    temporary_release(tmp);
    return ok ? 0 : -1;
}

// Makes every folder above path that is missing.
static int make_parents(const char* path, char* err) {
    char dir[PATH_BYTES];
    snprintf(dir, sizeof dir, "%s", path);
    for (char* p = dir + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            set_err(err, "%s: cannot create %s: %s", path, dir, strerror(errno));
            return -1;
        }
        *p = '/';
    }
    return 0;
}

int atomic_dir_open(const char* path, char* tmp, size_t tmp_len, char* err) {
    char target[PATH_BYTES];
    struct stat st;
    if (resolve(path, target, err) != 0 || make_parents(target, err) != 0) return -1;
    if (stat(target, &st) == 0 && !S_ISDIR(st.st_mode)) {
        set_err(err, "%s: not a directory", path);
        return -1;
    }
    if (temporary_name(target, tmp, tmp_len, err) != 0) return -1;
    if (mkdir(tmp, 0755) != 0) {
        set_err(err, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    temporary_hold(tmp);
    return 0;
}

// Puts the complete folder tmp at target, leaving what was there at tmp. Exchanging the two
// names is one step; where the file system cannot, the old folder steps aside under another
// name first, so that a crash in between never leaves it under a name the next run removes.
static int swap_in(const char* tmp, const char* target, char* err) {
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, target, RENAME_EXCHANGE) == 0) return 0;
    if (errno == ENOENT && rename(tmp, target) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) {
        set_err(err, "%s: cannot put %s in its place: %s", target, tmp, strerror(errno));
        return -1;
    }
    char old[PATH_BYTES + 32];
    snprintf(old, sizeof old, "%s.old%ld", target, (long)getpid());
    if (rename(target, old) != 0 || rename(tmp, target) != 0 || rename(old, tmp) != 0) {
        set_err(err, "%s: cannot put %s in its place: %s", target, tmp, strerror(errno));
        return -1;
    }
    return 0;
}

int atomic_dir_close(const char* tmp, const char* path, int ok, char* err) {
    char target[PATH_BYTES];
    if (ok && resolve(path, target, err) != 0) ok = 0;
    if (ok) {
        // The files in tmp are on disk (atomic_close); its entries must be too before the swap.
        int fd = open(tmp, O_RDONLY | O_DIRECTORY);
        ok = fd >= 0 && fsync(fd) == 0;
        if (!ok) set_err(err, "%s: cannot sync: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
    }
    if (ok && swap_in(tmp, target, err) != 0) ok = 0;
    // Once swapped, tmp holds the old folder. Should it resist removal, the next writer of path
    // removes it (its process is gone by then).
    temporary_remove(tmp);
    temporary_release(tmp);
    return ok ? 0 : -1;
}
