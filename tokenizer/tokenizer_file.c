// tokenizer/tokenizer_file.c: the project's tokenizer file, all integers little-endian:
//
//   header        8 x int32: magic 0x4B544746 ("FGTK"), version 1, vocab_size V, merges M,
//                 <|endoftext|> id, token byte total B, 0, 0
//   token lengths V x uint32: byte length of each token id, in id order
//   token bytes   B bytes: the tokens' bytes back to back, in id order
//   merges        M x 3 x int32: (left, right, result) ids, lowest rank first
//
// so the file is exactly 32 + 4V + B + 12M bytes. Any tokenizer can be written this way, the
// ones imported from GPT-2's files included. The tokenizer's fingerprint is a hash of these
// bytes, so it is the same whether the tokenizer was trained, imported or loaded. The reader checks the header, the file size and
// then, through tokenizer_assemble, every id and every merge's bytes.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "tokenizer/bpe.h"
#include "common/atomic_file.h"
#include "common/read_file.h"

#define TOKENIZER_MAGIC 0x4B544746
#define TOKENIZER_VERSION 1
#define HEADER_INTS 8

// Hands the file's bytes, in order, to put(data, bytes, ctx), which returns 0 on failure.
// Returns 1, or 0 as soon as put fails.
static int serialize(const Tokenizer* t, int (*put)(const void*, size_t, void*), void* ctx) {
    int V = t->vocab_size;
    uint32_t total = t->token_offset[V];
    int32_t header[HEADER_INTS] = {TOKENIZER_MAGIC, TOKENIZER_VERSION, V, t->n_merges, t->eot,
                                   (int32_t)total, 0, 0};
    int ok = put(header, sizeof header, ctx);
    for (int id = 0; id < V && ok; id++) {
        uint32_t len = t->token_offset[id + 1] - t->token_offset[id];
        ok = put(&len, sizeof len, ctx);
    }
    ok = ok && put(t->token_bytes, total, ctx);
    for (int r = 0; r < t->n_merges && ok; r++) {
        int32_t m[3] = {t->merges[r].left, t->merges[r].right, t->merges[r].result};
        ok = put(m, sizeof m, ctx);
    }
    return ok;
}

static int put_file(const void* data, size_t bytes, void* f) {
    return fwrite(data, 1, bytes, f) == bytes;
}

int tokenizer_save(const Tokenizer* t, const char* path, char* err) {
    char tmp[4096];
    FILE* f = atomic_open(path, tmp, sizeof tmp, err);
    if (!f) return -1;
    return atomic_close(f, tmp, path, serialize(t, put_file, f), err);
}

// FNV-1a, 64 bits.
static int put_hash(const void* data, size_t bytes, void* h) {
    uint64_t x = *(uint64_t*)h;
    for (size_t i = 0; i < bytes; i++) x = (x ^ ((const unsigned char*)data)[i]) * 0x100000001b3ULL;
    *(uint64_t*)h = x;
    return 1;
}

uint64_t tokenizer_fingerprint(const Tokenizer* t) {
    uint64_t h = 0xcbf29ce484222325ULL;
    serialize(t, put_hash, &h);
    return h ? h : 1;   // 0 means "no fingerprint" in a shard
}

// A regular file (a FIFO is refused, not waited on for a writer). The header is read and
// checked first, then the file's size against it: a large file that is no tokenizer (a shard, a
// text) is refused without being read.
Tokenizer* tokenizer_load(const char* path, char* err) {
    FILE* f = fopen_regular_file(path, err);
    if (!f) return NULL;
    unsigned char* body = NULL;
    uint32_t* offset = NULL;
    unsigned char* bytes = NULL;
    BpeMerge* merges = NULL;

    int32_t h[HEADER_INTS];
    size_t got = fread(h, 1, sizeof h, f);
    if (ferror(f)) {
        set_err(err, "%s: cannot read: %s", path, strerror(errno));
        goto fail;
    }
    if (got < sizeof h) {
        set_err(err, "%s: truncated: %zu bytes, shorter than the %zu-byte header", path, got, sizeof h);
        goto fail;
    }
    if (h[0] != TOKENIZER_MAGIC) {
        set_err(err, "%s: not a tokenizer file (magic 0x%08X, expected 0x%08X)", path,
                (unsigned)h[0], TOKENIZER_MAGIC);
        goto fail;
    }
    if (h[1] != TOKENIZER_VERSION) {
        set_err(err, "%s: unsupported version %d (this program reads version %d)", path, h[1],
                TOKENIZER_VERSION);
        goto fail;
    }
    int V = h[2], M = h[3], eot = h[4];
    if (V < 257 || V > TOKENIZER_MAX_VOCAB) {
        set_err(err, "%s: vocabulary size %d outside [257, %d]", path, V, TOKENIZER_MAX_VOCAB);
        goto fail;
    }
    if (M < 0 || M > V) {
        set_err(err, "%s: %d merges for a vocabulary of %d", path, M, V);
        goto fail;
    }
    if (h[5] < 0 || h[6] != 0 || h[7] != 0) {
        set_err(err, "%s: bad header (token bytes %d, reserved %d %d)", path, h[5], h[6], h[7]);
        goto fail;
    }
    uint32_t total = (uint32_t)h[5];
    uint64_t expected = sizeof h + 4 * (uint64_t)V + total + 12 * (uint64_t)M;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (uint64_t)st.st_size != expected) {
        set_err(err, "%s: %s: %lld bytes, the header says %llu", path,
                (uint64_t)st.st_size < expected ? "truncated" : "trailing bytes", (long long)st.st_size,
                (unsigned long long)expected);
        goto fail;
    }
    size_t body_len = (size_t)(expected - sizeof h);
    body = malloc(body_len + 1);   // one byte more, to see whether the file goes on
    if (!body) {
        set_err(err, "%s: out of memory", path);
        goto fail;
    }
    got = fread(body, 1, body_len + 1, f);
    if (ferror(f)) {
        set_err(err, "%s: cannot read: %s", path, strerror(errno));
        goto fail;
    }
    if (got < body_len) {
        set_err(err, "%s: truncated: %zu bytes, the header says %llu", path, sizeof h + got,
                (unsigned long long)expected);
        goto fail;
    }
    if (got > body_len) {
        set_err(err, "%s: trailing bytes: more than the %llu the header says", path,
                (unsigned long long)expected);
        goto fail;
    }
    fclose(f);
    f = NULL;

    offset = malloc((size_t)(V + 1) * sizeof(uint32_t));
    bytes = malloc(total ? total : 1);
    merges = malloc((size_t)(M ? M : 1) * sizeof(BpeMerge));
    if (!offset || !bytes || !merges) {
        set_err(err, "%s: out of memory", path);
        goto fail;
    }
    const unsigned char* p = body;
    offset[0] = 0;
    for (int id = 0; id < V; id++, p += 4) {
        uint32_t len;
        memcpy(&len, p, 4);
        if (len > total - offset[id]) {
            set_err(err, "%s: token %d of %u bytes runs past the %u token bytes", path, id, len, total);
            goto fail;
        }
        offset[id + 1] = offset[id] + len;
    }
    if (offset[V] != total) {
        set_err(err, "%s: token lengths add up to %u, the header says %u", path, offset[V], total);
        goto fail;
    }
    memcpy(bytes, p, total);
    p += total;
    for (int r = 0; r < M; r++, p += 12) {
        int32_t m[3];
        memcpy(m, p, sizeof m);
        merges[r] = (BpeMerge){m[0], m[1], m[2]};
    }
    free(body);
    return tokenizer_assemble(V, offset, bytes, eot, merges, M, path, err);
fail:
    if (f) fclose(f);
    free(body);
    free(offset);
    free(bytes);
    free(merges);
    return NULL;
}

Tokenizer* tokenizer_load_sized(const char* path, int vocab_size, char* err) {
    Tokenizer* t = tokenizer_load(path, err);
    if (t && tokenizer_vocab_size(t) != vocab_size) {
        set_err(err, "%s has %d tokens, the model %d", path, tokenizer_vocab_size(t), vocab_size);
        tokenizer_free(t);
        return NULL;
    }
    return t;
}
