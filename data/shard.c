// data/shard.c: reading and writing token shards (format in shard.h, compatible with llm.c).
// File: header int32[256] = [magic, version, n_tokens, vocab_size or 0, fingerprint low, high,
// 0...], then
// tokens (n_tokens,) as uint16 (version 1) or uint32 (version 2), little-endian.
#include "data/shard.h"
#include "common/atomic_file.h"
#include "common/read_file.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARD_HEADER_BYTES ((int64_t)SHARD_HEADER_INTS * (int64_t)sizeof(int32_t))
#define SHARD_CHUNK_BYTES (64 * 1024)   // tokens move through a buffer of this size

static size_t token_bytes(int version) { return version == SHARD_VERSION_U16 ? 2 : 4; }

// pread until count bytes or end of file; returns the bytes read, or -1 (errno set).
static ssize_t pread_full(int fd, void* buf, size_t count, int64_t offset) {
    size_t done = 0;
    while (done < count) {
        ssize_t r = pread(fd, (char*)buf + done, count - done, (off_t)(offset + (int64_t)done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

int shard_write_tagged(const char* path, const int* tokens, size_t n, int vocab_size,
                       uint64_t fingerprint, char* err) {
    if (vocab_size <= 0) {
        set_err(err, "%s: vocabulary size %d must be positive", path, vocab_size);
        return -1;
    }
    if (n > INT32_MAX) {
        set_err(err, "%s: %zu tokens do not fit one shard (at most %d)", path, n, INT32_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= vocab_size) {
            set_err(err, "%s: token %zu has id %d, outside the vocabulary of %d", path, i,
                    tokens[i], vocab_size);
            return -1;
        }
    }
    int version = vocab_size <= 65536 ? SHARD_VERSION_U16 : SHARD_VERSION_U32;
    int32_t header[SHARD_HEADER_INTS] = {SHARD_MAGIC, version, (int32_t)n, vocab_size,
                                         (int32_t)(uint32_t)fingerprint,
                                         (int32_t)(uint32_t)(fingerprint >> 32)};

    char tmp[4096];
    FILE* f = atomic_open(path, tmp, sizeof(tmp), err);
    if (!f) return -1;
    int ok = fwrite(header, sizeof(header), 1, f) == 1;
    unsigned char buf[SHARD_CHUNK_BYTES];
    size_t per_chunk = sizeof(buf) / token_bytes(version);
    for (size_t i = 0; ok && i < n; i += per_chunk) {
        size_t m = n - i < per_chunk ? n - i : per_chunk;
        for (size_t j = 0; j < m; j++) {
            if (version == SHARD_VERSION_U16) {
                uint16_t v = (uint16_t)tokens[i + j];
                memcpy(buf + 2 * j, &v, 2);
            } else {
                uint32_t v = (uint32_t)tokens[i + j];
                memcpy(buf + 4 * j, &v, 4);
            }
        }
        ok = fwrite(buf, token_bytes(version), m, f) == m;
    }
    return atomic_close(f, tmp, path, ok, err);
}

int shard_write(const char* path, const int* tokens, size_t n, int vocab_size, char* err) {
    return shard_write_tagged(path, tokens, n, vocab_size, 0, err);
}

int shard_read_header(int fd, const char* path, int vocab_size, ShardHeader* h, char* err) {
    int32_t header[SHARD_HEADER_INTS];
    ssize_t got = pread_full(fd, header, sizeof(header), 0);
    if (got < 0) {
        set_err(err, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    if (got < (ssize_t)sizeof(header)) {
        set_err(err, "%s: truncated: %zd bytes, shorter than the %lld-byte shard header", path,
                got, (long long)SHARD_HEADER_BYTES);
        return -1;
    }
    if (header[0] != SHARD_MAGIC) {
        set_err(err, "%s: not a token shard (magic %d, expected %d)", path, header[0],
                SHARD_MAGIC);
        return -1;
    }
    if (header[1] != SHARD_VERSION_U16 && header[1] != SHARD_VERSION_U32) {
        set_err(err, "%s: unsupported shard version %d (expected %d or %d)", path, header[1],
                SHARD_VERSION_U16, SHARD_VERSION_U32);
        return -1;
    }
    if (header[2] < 0 || header[3] < 0) {
        set_err(err, "%s: corrupt header (token count %d, vocabulary size %d)", path, header[2],
                header[3]);
        return -1;
    }
    h->version = header[1];
    h->n_tokens = header[2];
    h->vocab_size = header[3];
    h->fingerprint = (uint64_t)(uint32_t)header[4] | (uint64_t)(uint32_t)header[5] << 32;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, "%s: cannot stat: %s", path, strerror(errno));
        return -1;
    }
    int64_t expected = h->n_tokens * (int64_t)token_bytes(h->version);
    int64_t data = (int64_t)st.st_size - SHARD_HEADER_BYTES;
    if (data < expected) {
        set_err(err, "%s: truncated: the header announces %lld tokens (%lld bytes) but only %lld "
                "bytes follow it", path, (long long)h->n_tokens, (long long)expected,
                (long long)data);
        return -1;
    }
    if (data > expected) {
        set_err(err, "%s: %lld unexpected bytes after the %lld tokens the header announces", path,
                (long long)(data - expected), (long long)h->n_tokens);
        return -1;
    }
    if (vocab_size > 0 && h->vocab_size > vocab_size) {
        set_err(err, "%s: made for a vocabulary of %d ids, larger than the %d expected", path,
                h->vocab_size, vocab_size);
        return -1;
    }
    return 0;
}

int shard_check_fingerprint(const ShardHeader* h, const char* path, uint64_t expected, char* err) {
    if (!expected || !h->fingerprint || h->fingerprint == expected) return 0;
    set_err(err, "%s: made by another tokenizer (fingerprint %016llx, expected %016llx)", path,
            (unsigned long long)h->fingerprint, (unsigned long long)expected);
    return -1;
}

int shard_read_tokens(int fd, const char* path, const ShardHeader* h, int64_t start,
                      size_t count, int* out, int vocab_size, char* err) {
    if (start < 0 || start + (int64_t)count > h->n_tokens) {
        set_err(err, "%s: tokens %lld..%lld requested from a shard of %lld", path,
                (long long)start, (long long)(start + (int64_t)count), (long long)h->n_tokens);
        return -1;
    }
    size_t tb = token_bytes(h->version);
    unsigned char buf[SHARD_CHUNK_BYTES];
    size_t per_chunk = sizeof(buf) / tb;
    for (size_t i = 0; i < count; i += per_chunk) {
        size_t m = count - i < per_chunk ? count - i : per_chunk;
        int64_t offset = SHARD_HEADER_BYTES + (start + (int64_t)i) * (int64_t)tb;
        ssize_t got = pread_full(fd, buf, m * tb, offset);
        if (got < 0) {
            set_err(err, "%s: cannot read: %s", path, strerror(errno));
            return -1;
        }
        if ((size_t)got < m * tb) {
            set_err(err, "%s: file ended early at byte %lld (changed since it was opened?)",
                    path, (long long)(offset + got));
            return -1;
        }
        for (size_t j = 0; j < m; j++) {
            uint32_t v;
            if (tb == 2) {
                uint16_t v16;
                memcpy(&v16, buf + 2 * j, 2);
                v = v16;
            } else {
                memcpy(&v, buf + 4 * j, 4);
            }
            if (vocab_size > 0 && v >= (uint32_t)vocab_size) {
                set_err(err, "%s: token %lld has id %u, outside the vocabulary of %d", path,
                        (long long)(start + (int64_t)(i + j)), v, vocab_size);
                return -1;
            }
            out[i + j] = (int)v;
        }
    }
    return 0;
}

int* shard_read(const char* path, size_t* n, int vocab_size, uint64_t fingerprint, char* err) {
    int fd = open_regular_file(path, err);
    if (fd < 0) return NULL;
    ShardHeader h;
    int* tokens = NULL;
    if (shard_read_header(fd, path, vocab_size, &h, err) == 0 &&
        shard_check_fingerprint(&h, path, fingerprint, err) == 0) {
        // One extra element so that an empty shard still gets a non-NULL array.
        tokens = malloc(((size_t)h.n_tokens + 1) * sizeof(int));
        if (!tokens) {
            set_err(err, "%s: out of memory for %lld tokens", path, (long long)h.n_tokens);
        } else if (shard_read_tokens(fd, path, &h, 0, (size_t)h.n_tokens, tokens, vocab_size,
                                     err) != 0) {
            free(tokens);
            tokens = NULL;
        }
    }
    close(fd);
    if (tokens) *n = (size_t)h.n_tokens;
    return tokens;
}
