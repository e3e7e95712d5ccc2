// common/atomic_file.c: writing a file through a temporary sibling and a rename (atomic_file.h).
#include "common/atomic_file.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"

FILE* atomic_open(const char* path, char* tmp, size_t tmp_len, char* err) {
    if (snprintf(tmp, tmp_len, "%s.tmp%ld", path, (long)getpid()) >= (int)tmp_len) {
        set_err(err, "%s: path too long", path);
        return NULL;
    }
    FILE* f = fopen(tmp, "wb");
    if (!f) set_err(err, "%s: cannot create: %s", tmp, strerror(errno));
    return f;
}

int atomic_close(FILE* f, const char* tmp, const char* path, int ok, char* err) {
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int write_errno = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        write_errno = errno;
    }
    if (!ok) {
        set_err(err, "%s: write failed: %s", tmp, strerror(write_errno));
        remove(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        set_err(err, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}
