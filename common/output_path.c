// common/output_path.c: the checks of a program's output paths (output_path.h).
#include "common/output_path.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"

#define PATH_BYTES 4096

// dir into path (PATH_BYTES): 0, or -1 with err when it is empty or too long.
static int folder_name(const char* dir, char* path, char* err) {
    if (!*dir) {
        set_err(err, "the folder name is empty");
        return -1;
    }
    if (snprintf(path, PATH_BYTES, "%s", dir) >= PATH_BYTES) {
        set_err(err, "path too long");
        return -1;
    }
    return 0;
}

int check_dirs(const char* dir, char* err) {
    char path[PATH_BYTES];
    if (folder_name(dir, path, err) != 0) return -1;
    // Up from dir to the first part of it that exists (a file on the way stops stat too).
    struct stat st;
    while (stat(path, &st) != 0) {
        if ((errno != ENOENT && errno != ENOTDIR) || !strcmp(path, ".") || !strcmp(path, "/")) {
            set_err(err, "%s: %s", path, strerror(errno));
            return -1;
        }
        char* slash = strrchr(path, '/');
        while (slash && slash > path && slash[-1] == '/') slash--;
        if (!slash) snprintf(path, sizeof(path), ".");
        else slash[slash == path] = '\0';
    }
    if (!S_ISDIR(st.st_mode)) {
        set_err(err, "%s is not a directory", path);
        return -1;
    }
    if (access(path, W_OK | X_OK) != 0) {
        set_err(err, "cannot write in %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int make_dirs(const char* dir, char* err) {
    char path[PATH_BYTES];
    if (folder_name(dir, path, err) != 0) return -1;
    for (char* p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST) {
                set_err(err, "cannot create %s: %s", path, strerror(errno));
                return -1;
            }
            *p = saved;
            if (saved == '\0') break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        set_err(err, "%s is not a directory", dir);
        return -1;
    }
    return 0;
}

void folder_of(const char* path, char* dir, size_t len) {
    const char* slash = strrchr(path, '/');
    if (!slash) snprintf(dir, len, ".");
    else snprintf(dir, len, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

int check_output_file(const char* path, char* err) {
    char dir[PATH_BYTES], why[ERR_LEN];
    struct stat st;
    if (!*path || path[strlen(path) - 1] == '/') {
        set_err(err, "%s: not a file name", *path ? path : "''");
        return -1;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            set_err(err, "%s: is a directory", path);
            return -1;
        }
        if (access(path, W_OK) != 0) {
            set_err(err, "%s: cannot write: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    folder_of(path, dir, sizeof(dir));
    if (check_dirs(dir, why) != 0) {
        set_err(err, "%s: %s", path, why);
        return -1;
    }
    return 0;
}

FILE* open_output_file(const char* path, int append, int* appended, char* err) {
    char dir[PATH_BYTES], why[ERR_LEN];
    folder_of(path, dir, sizeof(dir));
    if (make_dirs(dir, why) != 0) {
        set_err(err, "%s: %s", path, why);
        return NULL;
    }
    struct stat st;
    *appended = append && stat(path, &st) == 0 && st.st_size > 0;
    FILE* f = fopen(path, *appended ? "a" : "w");
    if (!f) set_err(err, "%s: cannot open: %s", path, strerror(errno));
    return f;
}

int same_file(const char* a, const char* b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

// The next part of the path at *rest ('/'s skipped): its length, 0 at the end.
static size_t next_part(const char** rest) {
    *rest += strspn(*rest, "/");
    return strcspn(*rest, "/");
}

int resolve_path(const char* path, char* out, size_t len, char* err) {
    char known[PATH_BYTES], real[PATH_BYTES];   // real: realpath's PATH_MAX
    if (folder_name(path, known, err) != 0) return -1;
    // The deepest part that exists: path[0, exists), from the root (or the working folder) down.
    size_t exists = 0;
    struct stat st;
    for (const char* rest = path; ; ) {
        size_t n = next_part(&rest), end = (size_t)(rest - path) + n;
        if (n == 0) break;
        known[end] = '\0';
        int found = stat(known, &st) == 0;
        known[end] = path[end];
        if (!found) break;
        exists = end;
        rest += n;
    }
    if (exists) known[exists] = '\0';
    else snprintf(known, sizeof(known), "%s", *path == '/' ? "/" : ".");
    const char* rest = path + exists;
    if (!realpath(known, real)) {
        set_err(err, "%s: %s", known, strerror(errno));
        return -1;
    }
    size_t at = strlen(real);
    for (size_t n; (n = next_part(&rest)) > 0; rest += n) {
        if (n == 1 && rest[0] == '.') continue;
        if (n == 2 && rest[0] == '.' && rest[1] == '.') {
            at = (size_t)(strrchr(real, '/') - real);
            real[at ? at : 1] = '\0';
            at = strlen(real);
            continue;
        }
        if (at + 1 + n >= sizeof(real)) {
            set_err(err, "path too long");
            return -1;
        }
        if (real[at - 1] != '/') real[at++] = '/';
        memcpy(real + at, rest, n);
        real[at += n] = '\0';
    }
    if (snprintf(out, len, "%s", real) >= (int)len) {
        set_err(err, "path too long");
        return -1;
    }
    return 0;
}

int check_output_not_input(const char* output, const ProgramInput* inputs, int n, char* err) {
    for (int i = 0; i < n; i++) {
        const ProgramInput* in = &inputs[i];
        int same = 0;
        if (in->path && in->pattern) {
            glob_t matches;
            if (glob(in->path, 0, NULL, &matches) == 0)
                for (size_t k = 0; !same && k < matches.gl_pathc; k++)
                    if ((same = same_file(output, matches.gl_pathv[k])))
                        set_err(err, "%s: is the input %s %s (not overwritten)", output, in->flag, matches.gl_pathv[k]);
            globfree(&matches);
        } else if (in->path && (same = same_file(output, in->path))) {
            set_err(err, "%s: is the input %s %s (not overwritten)", output, in->flag, in->path);
        }
        if (same) return -1;
    }
    return 0;
}
