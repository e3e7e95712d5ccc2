// common/read_file.c: reading a whole file into memory, and opening a file that must be a regular
// one (see read_file.h).
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/read_file.h"
#include "common/error.h"

static void set_too_large(char* err, const char* path, size_t max_len) {
    set_err(err, "%s: larger than %zu bytes, the most such a file may hold", path, max_len);
}

// The bytes of f, opened from path, up to max_len of them (see read_file_at_most); closes f.
static unsigned char* read_stream(FILE* f, const char* path, size_t max_len, size_t* len, char* err) {
    // The buffer grows to max_len + 2 at most: room for the byte that shows the file is longer,
    // and for the 0 after the bytes.
    size_t cap = max_len + 2 < (1 << 16) ? max_len + 2 : 1 << 16, n = 0;
    unsigned char* buf = malloc(cap);
    for (;;) {
        if (!buf) {
            set_err(err, "%s: out of memory reading it", path);
            fclose(f);
            return NULL;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || n > max_len) break;
        size_t bigger_cap = cap > (max_len + 2) / 2 ? max_len + 2 : 2 * cap;
        unsigned char* bigger = realloc(buf, bigger_cap);
        if (!bigger) free(buf);
        buf = bigger;
        cap = bigger_cap;
    }
    if (ferror(f) || n > max_len) {
        if (n > max_len) set_too_large(err, path, max_len);
        else set_err(err, "%s: cannot read: %s", path, strerror(errno));
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;   // n < cap: room for it
    *len = n;
    return buf;
}

unsigned char* read_file(const char* path, size_t* len, char* err) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        set_err(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    return read_stream(f, path, SIZE_MAX / 2, len, err);   // beyond any memory: no bound
}

unsigned char* read_file_at_most(const char* path, size_t max_len, size_t* len, char* err) {
    FILE* f = fopen_regular_file(path, err);
    if (!f) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (uint64_t)st.st_size > max_len) {   // refused unread
        set_too_large(err, path, max_len);
        fclose(f);
        return NULL;
    }
    return read_stream(f, path, max_len, len, err);
}

int open_regular_file(const char* path, char* err) {
    // Non-blocking, so that opening a FIFO returns at once (fstat refuses it); a regular file
    // reads the same either way.
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        set_err(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, "%s: cannot stat: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        set_err(err, "%s: is a directory", path);
    } else if (!S_ISREG(st.st_mode)) {
        set_err(err, "%s: not a regular file", path);
    } else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        set_err(err, "%s: cannot open: %s", path, strerror(errno));
    } else {
        return fd;
    }
    close(fd);
    return -1;
}

FILE* fopen_regular_file(const char* path, char* err) {
    int fd = open_regular_file(path, err);
    if (fd < 0) return NULL;
    FILE* f = fdopen(fd, "rb");
    if (!f) {
        set_err(err, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

int file_size_refused(FILE* f, const char* path, long long expected, char* err) {
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        set_err(err, "%s: cannot stat: %s", path, strerror(errno));
        return -1;
    }
    if ((long long)st.st_size != expected) {
        set_err(err, "%s: %lld bytes, expected %lld: truncated or corrupt", path, (long long)st.st_size, expected);
        return -1;
    }
    return 0;
}
