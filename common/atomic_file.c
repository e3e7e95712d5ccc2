// common/atomic_file.c: writing a file through a temporary sibling and a rename, and a folder
// through a temporary sibling folder and an exchange of the two (atomic_file.h).
#define _GNU_SOURCE   // renameat2
#include "common/atomic_file.h"

#include <fcntl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/temporary.h"

#define PATH_BYTES 4096
#define MAX_LINKS 40

// The absolute path that path names, existing or not, into out (PATH_BYTES): every symbolic
// link on it followed, ".", ".." and repeated or trailing slashes gone. Past the first name
// that does not exist the rest is taken as written.
static int canonical(const char* path, char* out, char* err) {
    char rest[PATH_BYTES], next[PATH_BYTES];
    size_t len = 0;   // out without its terminator; "" is the root
    if (!*path) {
        set_err(err, "'': empty path");
        return -1;
    }
    if (path[0] != '/') {
        if (!getcwd(out, PATH_BYTES)) {
            set_err(err, "%s: cannot find the current folder: %s", path, strerror(errno));
            return -1;
        }
        len = strcmp(out, "/") ? strlen(out) : 0;
    }
    out[len] = 0;
    if (snprintf(rest, sizeof rest, "%s", path) >= (int)sizeof rest) {
        set_err(err, "%s: path too long", path);
        return -1;
    }
    int missing = 0, links = 0;
    for (char* p = rest; *p;) {
        while (*p == '/') p++;
        if (!*p) break;
        char* end = strchrnul(p, '/');
        size_t n = (size_t)(end - p);
        if (n == 1 && p[0] == '.') {
            p = end;
            continue;
        }
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (len > 0 && out[len - 1] != '/') len--;
            if (len > 0) len--;
            out[len] = 0;
            struct stat st;
            if (missing) missing = lstat(len ? out : "/", &st) != 0;
            p = end;
            continue;
        }
        if (len + 1 + n >= PATH_BYTES) {
            set_err(err, "%s: path too long", path);
            return -1;
        }
        out[len] = '/';
        memcpy(out + len + 1, p, n);
        size_t parent_len = len;
        len += 1 + n;
        out[len] = 0;
        p = end;
        struct stat st;
        if (missing) continue;
        if (lstat(out, &st) != 0) {
            if (errno != ENOENT) {
                set_err(err, "%s: cannot look up %s: %s", path, out, strerror(errno));
                return -1;
            }
            missing = 1;
        } else if (S_ISLNK(st.st_mode)) {
            ssize_t k = readlink(out, next, sizeof next - 1);
            if (k < 0 || ++links > MAX_LINKS) {
                set_err(err, "%s: cannot follow the symbolic link %s: %s", path, out,
                        k < 0 ? strerror(errno) : "too many levels");
                return -1;
            }
            // What is left to walk: the link's text, then the names after the link.
            if ((size_t)k + 1 + strlen(p) >= sizeof next) {
                set_err(err, "%s: path too long", path);
                return -1;
            }
            next[k] = '/';
            strcpy(next + k + 1, p);
            strcpy(rest, next);
            p = rest;
            len = next[0] == '/' ? 0 : parent_len;
            out[len] = 0;
        } else if (!S_ISDIR(st.st_mode) && strspn(p, "/") < strlen(p)) {
            set_err(err, "%s: %s is not a directory", path, out);
            return -1;
        }
    }
    if (len == 0) strcpy(out, "/");
    return 0;
}

// How path is written: 1 in place, for a device, a FIFO or a socket, or a file reached through
// a link that names no path (as /proc/self/fd's links to pipes and deleted files do); 0 through
// a temporary beside target, the file that path names. -1 with err for a folder.
static int plan(const char* path, char* target, char* err) {
    struct stat st, at_target;
    int exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        set_err(err, "%s: is a directory", path);
        return -1;
    }
    size_t n = strlen(path);
    if (!exists && n > 0 && path[n - 1] == '/') {
        set_err(err, "%s: ends in '/', as only a folder's name does", path);
        return -1;
    }
    if (!exists || S_ISREG(st.st_mode)) {
        if (canonical(path, target, err) != 0) return -1;
        if (!exists || (stat(target, &at_target) == 0 && at_target.st_dev == st.st_dev &&
                        at_target.st_ino == st.st_ino)) {
            return 0;
        }
    }
    snprintf(target, PATH_BYTES, "%s", path);
    return 1;
}

// Cuts the last name off path (a canonical one), leaving the folder that holds it.
static void cut_to_parent(char* path) {
    char* slash = strrchr(path, '/');
    slash[slash == path] = 0;
}

int atomic_check(const char* path, char* err) {
    char target[PATH_BYTES], dir[PATH_BYTES];
    int in_place = plan(path, target, err);
    if (in_place < 0) return -1;
    if (!in_place) {
        strcpy(dir, target);
        cut_to_parent(dir);
    }
    const char* what = in_place ? path : dir;
    if (access(what, in_place ? W_OK : W_OK | X_OK) != 0) {
        set_err(err, "%s: cannot write %s: %s", path, what, strerror(errno));
        return -1;
    }
    return 0;
}

FILE* atomic_open(const char* path, char* tmp, size_t tmp_len, char* err) {
    char target[PATH_BYTES];
    int in_place = plan(path, target, err);
    if (in_place < 0) return NULL;
    if (in_place) {
        tmp[0] = 0;
        FILE* f = fopen(path, "wb");
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
    if (ok) {
        int now_in_place = plan(path, target, err);
        if (now_in_place != 0) ok = 0;
        if (now_in_place > 0) {
            set_err(err, "%s: no longer a regular file; the new content is not renamed over it",
                    path);
        }
    }
    if (ok && rename(tmp, target) != 0) {
        set_err(err, "%s: cannot rename to %s: %s", tmp, target, strerror(errno));
        ok = 0;
    }
    if (!ok) remove(tmp);
    temporary_release(tmp);
    return ok ? 0 : -1;
}

// Whether the folder dir (canonical, existing; st its stat) is where a file system is mounted:
// the root, a folder on another device than its parent, or a mount point of the process's
// mount table (a bind mount shares its parent's device).
static int is_mount_point(const char* dir, const struct stat* st) {
    char parent[PATH_BYTES];
    struct stat above;
    if (!strcmp(dir, "/")) return 1;
    strcpy(parent, dir);
    cut_to_parent(parent);
    if (stat(parent, &above) == 0 && above.st_dev != st->st_dev) return 1;
    FILE* f = fopen("/proc/self/mountinfo", "r");
    if (!f) return 0;
    // Each line: id, parent id, device, root, mount point, ...; in the mount point a space,
    // tab, newline or backslash is written as \ and three octal digits.
    char line[2 * PATH_BYTES], point[PATH_BYTES];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        const char* field = line;
        for (int skip = 0; skip < 4 && field; skip++) {
            field = strchr(field, ' ');
            if (field) field++;
        }
        if (!field) continue;
        size_t n = 0;
        for (const char* c = field; *c && *c != ' ' && *c != '\n' && n + 1 < sizeof point; n++) {
            if (c[0] == '\\' && c[1] >= '0' && c[1] <= '3' && c[2] >= '0' && c[2] <= '7' &&
                c[3] >= '0' && c[3] <= '7') {
                point[n] = (char)((c[1] - '0') * 64 + (c[2] - '0') * 8 + (c[3] - '0'));
                c += 4;
            } else {
                point[n] = *c++;
            }
        }
        point[n] = 0;
        found = !strcmp(point, dir);
    }
    fclose(f);
    return found;
}

// The canonical folder of path into dir (PATH_BYTES), once it is known that a new folder can
// be put there in one step (atomic_dir_check).
static int dir_target(const char* path, char* dir, char* err) {
    if (canonical(path, dir, err) != 0) return -1;
    struct stat st;
    if (stat(dir, &st) == 0) {
        char cwd[PATH_BYTES];
        size_t n = strlen(dir);
        if (!S_ISDIR(st.st_mode)) {
            set_err(err, "%s: not a directory", path);
            return -1;
        }
        if (is_mount_point(dir, &st)) {
            set_err(err, "%s: %s is a mount point, which another folder cannot replace; "
                    "give a folder inside it", path, dir);
            return -1;
        }
        if (getcwd(cwd, sizeof cwd) && !strncmp(cwd, dir, n) && (cwd[n] == '/' || !cwd[n])) {
            set_err(err, "%s: %s is the current folder or above it, and replacing it would "
                    "leave the shell in a removed folder; give a folder of its own", path, dir);
            return -1;
        }
        if (access(dir, W_OK | X_OK) != 0) {
            set_err(err, "%s: cannot write %s: %s", path, dir, strerror(errno));
            return -1;
        }
    }
    // The nearest folder above that exists: the missing ones and the temporary are made in it.
    char above[PATH_BYTES];
    strcpy(above, dir);
    do cut_to_parent(above); while (access(above, F_OK) != 0 && strcmp(above, "/"));
    if (access(above, W_OK | X_OK) != 0) {
        set_err(err, "%s: cannot write %s: %s", path, above, strerror(errno));
        return -1;
    }
    return 0;
}

int atomic_dir_check(const char* path, char* err) {
    char dir[PATH_BYTES];
    return dir_target(path, dir, err);
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
    char dir[PATH_BYTES];
    if (dir_target(path, dir, err) != 0 || make_parents(dir, err) != 0) return -1;
    if (temporary_name(dir, tmp, tmp_len, err) != 0) return -1;
    if (mkdir(tmp, 0755) != 0) {
        set_err(err, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    temporary_hold(tmp);
    // The folder it replaces passes on its owner and group, each where this process may give
    // it (another's folder only as root; a group only one this process is in), and its mode
    // with its setgid bit, so that the files made in it take its group as they would have in
    // the old one; the owner may write in it until atomic_dir_close gives it the exact mode.
    struct stat old;
    if (stat(dir, &old) == 0) {
        if (chown(tmp, old.st_uid, old.st_gid) != 0) (void)!chown(tmp, (uid_t)-1, old.st_gid);
        if (chmod(tmp, (old.st_mode & 07777) | S_IRWXU) != 0) {
            set_err(err, "%s: cannot give it the mode of %s: %s", tmp, dir, strerror(errno));
            temporary_remove(tmp);
            temporary_release(tmp);
            return -1;
        }
    }
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
    char dir[PATH_BYTES];
    if (ok && dir_target(path, dir, err) != 0) ok = 0;
    struct stat old;
    if (ok && stat(dir, &old) == 0 && chmod(tmp, old.st_mode & 07777) != 0) {
        set_err(err, "%s: cannot give it the mode of %s: %s", tmp, dir, strerror(errno));
        ok = 0;
    }
    if (ok) {
        // The files in tmp are on disk (atomic_close); its entries must be too before the swap.
        int fd = open(tmp, O_RDONLY | O_DIRECTORY);
        ok = fd >= 0 && fsync(fd) == 0;
        if (!ok) set_err(err, "%s: cannot sync: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
    }
    if (ok && swap_in(tmp, dir, err) != 0) ok = 0;
    // Once swapped, tmp holds the old folder. Should it resist removal, the next writer of path
    // removes it (its process is gone by then).
    temporary_remove(tmp);
    temporary_release(tmp);
    return ok ? 0 : -1;
}
