// tokenizer/gpt2_vocab.c: GPT-2's own vocabulary files, giving GPT-2's exact token ids.
//   encoder.json  one JSON object {"token": id, ...}: every token's id, ids 0..N-1 each once,
//                 <|endoftext|> among them.
//   vocab.bpe     an optional "#version" line, then one merge per line, "left right", lowest
//                 rank first; the merged token is left and right joined.
// Both spell a token's bytes as text through GPT-2's byte-to-unicode table: the printable
// bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves, the 68 others, in byte order,
// for U+0100, U+0101, ... (so the space 0x20 is U+0120 'Ġ').
#include <stdint.h>
#include <string.h>
#include "tokenizer/bpe.h"
#include "common/read_file.h"
#include "tokenizer/strmap.h"

#define N_SHIFTED 68   // bytes that GPT-2 writes as U+0100 + k
// GPT-2's encoder.json and vocab.bpe are about a megabyte each; files larger than this are not
// vocabulary files (or never end, as a device may not).
#define GPT2_FILE_MAX_BYTES ((size_t)1 << 30)

// byte_of_codepoint[cp] = the byte the code point cp stands for, or -1; cp < 256 + N_SHIFTED.
static void gpt2_byte_table(int byte_of_codepoint[256 + N_SHIFTED]) {
    int shifted = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        byte_of_codepoint[b] = printable ? b : -1;
        if (!printable) byte_of_codepoint[256 + shifted++] = b;
    }
}

// Decodes one UTF-8 code point of s[0..n) into *cp; returns its byte length, or 0 if invalid.
static size_t utf8_decode(const unsigned char* s, size_t n, uint32_t* cp) {
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (!len || len > n || s[0] > 0xF4) return 0;
    uint32_t c = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_cp[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

// Bytes that a code point of a token's text stands for: appended to *out; -1 when the code
// point is not in GPT-2's table.
static int append_byte(const int* byte_of_codepoint, uint32_t cp, unsigned char* out, size_t* n) {
    if (cp >= 256 + N_SHIFTED || byte_of_codepoint[cp] < 0) return -1;
    out[(*n)++] = (unsigned char)byte_of_codepoint[cp];
    return 0;
}

typedef struct {
    const char* path;
    const unsigned char* s;
    size_t n, pos;
    char* err;
} Json;

static void json_skip_space(Json* j) {
    while (j->pos < j->n && j->s[j->pos] && strchr(" \t\r\n", j->s[j->pos])) j->pos++;
}

static int json_fail(Json* j, const char* what) {
    set_err(j->err, "%s: byte %zu: %s", j->path, j->pos, what);
    return -1;
}

static int json_hex4(Json* j, uint32_t* v) {
    *v = 0;
    for (int i = 0; i < 4; i++, j->pos++) {
        if (j->pos >= j->n) return json_fail(j, "unterminated \\u escape");
        unsigned char c = j->s[j->pos];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
                c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return json_fail(j, "bad \\u escape");
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

// Reads the JSON string at j->pos (at its opening quote) and writes the bytes it stands for to
// out (room for as many bytes as the string has); their count goes to *len.
static int json_token(Json* j, const int* byte_of_codepoint, unsigned char* out, size_t* len) {
    if (j->pos >= j->n || j->s[j->pos] != '"') return json_fail(j, "expected a string");
    j->pos++;
    *len = 0;
    for (;;) {
        if (j->pos >= j->n) return json_fail(j, "unterminated string");
        unsigned char c = j->s[j->pos];
        uint32_t cp;
        if (c == '"') {
            j->pos++;
            return 0;
        } else if (c == '\\') {
            if (++j->pos >= j->n) return json_fail(j, "unterminated string");
            char e = (char)j->s[j->pos++];
            const char* from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            if (e == 'u') {
                if (json_hex4(j, &cp)) return -1;
                if (cp >= 0xD800 && cp <= 0xDBFF) {   // surrogate pair
                    uint32_t lo;
                    if (j->pos + 2 > j->n || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u')
                        return json_fail(j, "lone surrogate in \\u escape");
                    j->pos += 2;
                    if (json_hex4(j, &lo)) return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) return json_fail(j, "bad surrogate pair");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return json_fail(j, "lone surrogate in \\u escape");
                }
            } else if (e && strchr(from, e)) {
                cp = (unsigned char)to[strchr(from, e) - from];
            } else {
                return json_fail(j, "bad escape");
            }
        } else if (c < 0x20) {
            return json_fail(j, "control character in string");
        } else {
            size_t l = utf8_decode(j->s + j->pos, j->n - j->pos, &cp);
            if (!l) return json_fail(j, "invalid UTF-8");
            j->pos += l;
        }
        if (append_byte(byte_of_codepoint, cp, out, len)) {
            char what[96];
            snprintf(what, sizeof what, "character U+%04X is not in GPT-2's byte-to-unicode table", cp);
            return json_fail(j, what);
        }
    }
}

// Token bytes in id order, from encoder.json. -1 with err on any problem.
static int read_encoder(const char* path, const int* byte_of_codepoint, int* vocab_size,
                        uint32_t** offset_out, unsigned char** bytes_out, int* eot, char* err) {
    size_t size;
    unsigned char* file = read_file_at_most(path, GPT2_FILE_MAX_BYTES, &size, err);
    if (!file) return -1;
    // Each token's bytes are no more than its JSON text: pool and per-entry arrays fit size.
    unsigned char* pool = malloc(size + 1);
    size_t* entry_start = malloc((size / 4 + 1) * sizeof(size_t));   // an entry takes >= 5 bytes
    int* entry_id = malloc((size / 4 + 1) * sizeof(int));
    uint32_t* offset = NULL;
    unsigned char* bytes = NULL;
    int* entry_of_id = NULL;
    int status = -1;
    if (!pool || !entry_start || !entry_id) {
        set_err(err, "%s: out of memory", path);
        goto done;
    }
    Json j = {path, file, size, 0, err};
    size_t pool_n = 0;
    int n = 0;
    json_skip_space(&j);
    if (j.pos >= size || file[j.pos] != '{') { json_fail(&j, "expected '{'"); goto done; }
    j.pos++;
    json_skip_space(&j);
    if (j.pos < size && file[j.pos] == '}') { json_fail(&j, "no tokens"); goto done; }
    for (;;) {
        json_skip_space(&j);
        size_t len;
        if (json_token(&j, byte_of_codepoint, pool + pool_n, &len)) goto done;
        json_skip_space(&j);
        if (j.pos >= size || file[j.pos] != ':') { json_fail(&j, "expected ':'"); goto done; }
        j.pos++;
        json_skip_space(&j);
        int64_t id = 0;
        size_t digits = 0;
        for (; j.pos < size && file[j.pos] >= '0' && file[j.pos] <= '9' && id <= INT32_MAX; j.pos++, digits++)
            id = id * 10 + (file[j.pos] - '0');
        if (!digits || id >= TOKENIZER_MAX_VOCAB) {
            char what[64];
            snprintf(what, sizeof what, "expected a token id in [0, %d)", TOKENIZER_MAX_VOCAB);
            json_fail(&j, what);
            goto done;
        }
        entry_start[n] = pool_n;
        entry_id[n++] = (int)id;
        pool_n += len;
        json_skip_space(&j);
        if (j.pos < size && file[j.pos] == ',') { j.pos++; continue; }
        if (j.pos < size && file[j.pos] == '}') { j.pos++; break; }
        json_fail(&j, "expected ',' or '}'");
        goto done;
    }
    json_skip_space(&j);
    if (j.pos != size) { json_fail(&j, "trailing characters after the object"); goto done; }
    entry_start[n] = pool_n;
    if (n < 257) {
        set_err(err, "%s: %d tokens; a byte-level vocabulary has at least 257", path, n);
        goto done;
    }

    // Ids must be exactly 0..n-1: each below n and none twice.
    entry_of_id = malloc((size_t)n * sizeof(int));
    offset = malloc((size_t)(n + 1) * sizeof(uint32_t));
    bytes = malloc(pool_n ? pool_n : 1);
    if (!entry_of_id || !offset || !bytes) {
        set_err(err, "%s: out of memory", path);
        goto done;
    }
    for (int id = 0; id < n; id++) entry_of_id[id] = -1;
    for (int e = 0; e < n; e++) {
        int id = entry_id[e];
        if (id >= n) {
            set_err(err, "%s: token id %d out of range: %d tokens need ids 0..%d", path, id, n, n - 1);
            goto done;
        }
        if (entry_of_id[id] >= 0) {
            set_err(err, "%s: token id %d given twice", path, id);
            goto done;
        }
        entry_of_id[id] = e;
    }
    *eot = -1;
    offset[0] = 0;
    for (int id = 0; id < n; id++) {
        int e = entry_of_id[id];
        size_t len = entry_start[e + 1] - entry_start[e];
        memcpy(bytes + offset[id], pool + entry_start[e], len);
        offset[id + 1] = offset[id] + (uint32_t)len;
        if (len == strlen(EOT_TEXT) && memcmp(pool + entry_start[e], EOT_TEXT, len) == 0) *eot = id;
    }
    if (*eot < 0) {
        set_err(err, "%s: no %s token", path, EOT_TEXT);
        goto done;
    }
    *vocab_size = n;
    *offset_out = offset;
    *bytes_out = bytes;
    offset = NULL;
    bytes = NULL;
    status = 0;
done:
    free(file);
    free(pool);
    free(entry_start);
    free(entry_id);
    free(entry_of_id);
    free(offset);
    free(bytes);
    return status;
}

// Bytes of one side of a vocab.bpe line (UTF-8 text through GPT-2's table) into out.
static int merge_side(const int* byte_of_codepoint, const unsigned char* s, size_t n,
                      unsigned char* out, size_t* len) {
    *len = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = utf8_decode(s + i, n - i, &cp);
        if (!l || append_byte(byte_of_codepoint, cp, out, len)) return -1;
        i += l;
    }
    return 0;
}

// Merges from vocab.bpe, each token looked up by its bytes in tokens. -1 with err.
static int read_merges(const char* path, const int* byte_of_codepoint, const StrMap* tokens,
                       BpeMerge** merges_out, int* n_merges, char* err) {
    size_t size;
    unsigned char* file = read_file_at_most(path, GPT2_FILE_MAX_BYTES, &size, err);
    if (!file) return -1;
    size_t cap = 1;
    for (size_t i = 0; i < size; i++) cap += file[i] == '\n';
    BpeMerge* merges = malloc(cap * sizeof(BpeMerge));
    unsigned char* buf = malloc(size + 1);   // left and right bytes, then the two joined
    if (!merges || !buf) {
        set_err(err, "%s: out of memory", path);
        goto fail;
    }
    int n = 0;
    size_t line_no = 0;
    for (size_t pos = 0; pos < size;) {
        const unsigned char* line = file + pos;
        const unsigned char* nl = memchr(line, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - line) : size - pos;
        pos += len + 1;
        line_no++;
        if (len && line[len - 1] == '\r') len--;
        if (len == 0 || (line_no == 1 && len >= 8 && memcmp(line, "#version", 8) == 0)) continue;
        const unsigned char* space = memchr(line, ' ', len);
        size_t left_n = space ? (size_t)(space - line) : 0;
        if (!space || left_n == 0 || left_n + 1 == len || memchr(space + 1, ' ', len - left_n - 1)) {
            set_err(err, "%s: line %zu: expected two tokens separated by one space", path, line_no);
            goto fail;
        }
        size_t lb, rb;
        if (merge_side(byte_of_codepoint, line, left_n, buf, &lb) ||
            merge_side(byte_of_codepoint, space + 1, len - left_n - 1, buf + lb, &rb)) {
            set_err(err, "%s: line %zu: a token is not valid UTF-8 through GPT-2's byte-to-unicode table",
                    path, line_no);
            goto fail;
        }
        int left = strmap_get(tokens, buf, lb, hash_bytes(buf, lb));
        int right = strmap_get(tokens, buf + lb, rb, hash_bytes(buf + lb, rb));
        int result = strmap_get(tokens, buf, lb + rb, hash_bytes(buf, lb + rb));
        if (left < 0 || right < 0) {
            int bad_n = left < 0 ? (int)left_n : (int)(len - left_n - 1);
            const char* bad = (const char*)(left < 0 ? line : space + 1);
            set_err(err, "%s: line %zu: token '%.*s' is not in the encoder", path, line_no, bad_n, bad);
            goto fail;
        }
        if (result < 0) {
            set_err(err, "%s: line %zu: the merge '%.*s' makes a token that is not in the encoder",
                    path, line_no, (int)len, (const char*)line);
            goto fail;
        }
        merges[n++] = (BpeMerge){left, right, result};
    }
    free(file);
    free(buf);
    *merges_out = merges;
    *n_merges = n;
    return 0;
fail:
    free(file);
    free(buf);
    free(merges);
    return -1;
}

Tokenizer* tokenizer_load_gpt2(const char* encoder_json, const char* vocab_bpe, char* err) {
    int byte_of_codepoint[256 + N_SHIFTED];
    gpt2_byte_table(byte_of_codepoint);
    int V = 0, eot = -1;
    uint32_t* offset = NULL;
    unsigned char* bytes = NULL;
    if (read_encoder(encoder_json, byte_of_codepoint, &V, &offset, &bytes, &eot, err)) return NULL;

    StrMap tokens;
    if (strmap_init(&tokens, (size_t)V)) {
        set_err(err, "%s: out of memory", encoder_json);
        free(offset);
        free(bytes);
        return NULL;
    }
    for (int id = 0; id < V; id++) {
        const unsigned char* key = bytes + offset[id];
        size_t len = offset[id + 1] - offset[id];
        uint64_t h = hash_bytes(key, len);
        int other = strmap_get(&tokens, key, len, h);
        if (other >= 0 || strmap_put(&tokens, key, len, h, id)) {
            if (other >= 0) set_err(err, "%s: tokens %d and %d have the same bytes", encoder_json, other, id);
            else set_err(err, "%s: out of memory", encoder_json);
            goto fail;
        }
    }
    for (int b = 0; b < 256; b++) {
        unsigned char byte = (unsigned char)b;
        if (strmap_get(&tokens, &byte, 1, hash_bytes(&byte, 1)) < 0) {
            set_err(err, "%s: no token for byte 0x%02X", encoder_json, b);
            goto fail;
        }
    }
    BpeMerge* merges;
    int n_merges;
    if (read_merges(vocab_bpe, byte_of_codepoint, &tokens, &merges, &n_merges, err)) goto fail;
    strmap_free(&tokens);
    return tokenizer_assemble(V, offset, bytes, eot, merges, n_merges, vocab_bpe, err);
fail:
    strmap_free(&tokens);
    free(offset);
    free(bytes);
    return NULL;
}
