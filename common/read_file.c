// common/read_file.c: reading a whole file into memory (see read_file.h).
#include <errno.h>
#include <string.h>
#include "common/read_file.h"
#include "common/error.h"

unsigned char* read_file(const char* path, size_t* len, char* err) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        set_err(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char* buf = malloc(cap);
    for (;;) {
        if (!buf) {
            set_err(err, "%s: out of memory reading it", path);
            fclose(f);
            return NULL;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        unsigned char* bigger = realloc(buf, 2 * cap);
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    if (ferror(f)) {
        set_err(err, "%s: cannot read: %s", path, strerror(errno));
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;   // n < cap: room for it
    *len = n;
    return buf;
}
