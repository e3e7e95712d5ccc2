// data/multiple_choice.c: data/multiple_choice.h. A JSON reader for one line at a time, as
// much of JSON as the layout needs (objects, arrays, strings with every escape, numbers, true,
// false, null), strict about the rest, so that a wrong file is refused with the line and column
// of its first fault rather than read as something else.
#include "data/multiple_choice.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/read_file.h"

#define MAX_FILE_BYTES ((size_t)1 << 30)
#define MAX_DEPTH 64

// One line being read: [p, end); what went wrong goes to why (with the column).
typedef struct {
    const char* start;
    const char* p;
    const char* end;
    char why[200];
} Line;

static int fail(Line* l, const char* what) {
    if (!l->why[0]) snprintf(l->why, sizeof(l->why), "%s at column %d", what, (int)(l->p - l->start) + 1);
    return -1;
}

static void skip_space(Line* l) {
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\r')) l->p++;
}

static int expect(Line* l, char c) {
    skip_space(l);
    if (l->p >= l->end || *l->p != c) {
        char what[32];
        snprintf(what, sizeof(what), "expected '%c'", c);
        return fail(l, what);
    }
    l->p++;
    return 0;
}

static int hex4(Line* l, unsigned* v) {
    if (l->end - l->p < 4) return fail(l, "a \\u escape needs 4 hex digits");
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = l->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail(l, "a \\u escape needs 4 hex digits");
        *v = *v * 16 + (unsigned)d;
    }
    l->p += 4;
    return 0;
}

static size_t put_utf8(char* out, unsigned cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// A string at p (its opening quote): its UTF-8 into a malloc'd *out when out is not NULL (no
// string grows when unescaped, so the line's length bounds it).
static int read_string(Line* l, char** out) {
    skip_space(l);
    if (l->p >= l->end || *l->p != '"') return fail(l, "expected a string");
    l->p++;
    char* s = out ? (char*)malloc((size_t)(l->end - l->p) + 1) : NULL;
    if (out && !s) return fail(l, "out of memory");
    size_t n = 0;
    for (;;) {
        if (l->p >= l->end) { free(s); return fail(l, "unterminated string"); }
        unsigned char c = (unsigned char)*l->p++;
        if (c == '"') break;
        if (c < 0x20) { l->p--; free(s); return fail(l, "a control character inside a string"); }
        if (c != '\\') { if (s) s[n] = (char)c; n++; continue; }
        if (l->p >= l->end) { free(s); return fail(l, "unterminated string"); }
        char e = *l->p++;
        const char* plain = strchr("\"\\/bfnrt", e);
        if (e && plain) {
            static const char unescaped[] = "\"\\/\b\f\n\r\t";
            if (s) s[n] = unescaped[plain - "\"\\/bfnrt"];
            n++;
            continue;
        }
        if (e != 'u') { l->p--; free(s); return fail(l, "an unknown escape"); }
        unsigned cp;
        if (hex4(l, &cp) != 0) { free(s); return -1; }
        if (cp == 0) { free(s); return fail(l, "a NUL character (\\u0000) inside a string"); }
        if (cp >= 0xD800 && cp < 0xDC00) {   // a high surrogate: its low half must follow
            unsigned low;
            if (l->end - l->p < 2 || l->p[0] != '\\' || l->p[1] != 'u') { free(s); return fail(l, "a lone surrogate"); }
            l->p += 2;
            if (hex4(l, &low) != 0) { free(s); return -1; }
            if (low < 0xDC00 || low >= 0xE000) { free(s); return fail(l, "a lone surrogate"); }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
            free(s);
            return fail(l, "a lone surrogate");
        }
        char buf[4];
        size_t k = put_utf8(buf, cp);
        if (s) memcpy(s + n, buf, k);
        n += k;
    }
    if (s) {
        s[n] = '\0';
        *out = s;
    }
    return 0;
}

// A number; *integer gets its value when it is a whole number in int range without fraction
// or exponent (else *is_integer is 0).
static int read_number(Line* l, long long* integer, int* is_integer) {
    const char* p = l->p;
    int negative = p < l->end && *p == '-';
    if (negative) p++;
    if (p >= l->end || *p < '0' || *p > '9') return fail(l, "expected a value");
    long long v = 0;
    int whole = 1;
    if (*p == '0') p++;
    else
        while (p < l->end && *p >= '0' && *p <= '9') {
            if (v < (1LL << 40)) v = v * 10 + (*p - '0');
            else whole = 0;
            p++;
        }
    if (p < l->end && *p == '.') {
        whole = 0;
        if (++p >= l->end || *p < '0' || *p > '9') { l->p = p; return fail(l, "a digit must follow '.'"); }
        while (p < l->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < l->end && (*p == 'e' || *p == 'E')) {
        whole = 0;
        if (++p < l->end && (*p == '+' || *p == '-')) p++;
        if (p >= l->end || *p < '0' || *p > '9') { l->p = p; return fail(l, "a digit must follow the exponent"); }
        while (p < l->end && *p >= '0' && *p <= '9') p++;
    }
    l->p = p;
    *is_integer = whole;
    *integer = negative ? -v : v;
    return 0;
}

static int read_value(Line* l, int depth);

static int read_literal(Line* l, const char* word) {
    size_t n = strlen(word);
    if ((size_t)(l->end - l->p) < n || memcmp(l->p, word, n) != 0) return fail(l, "expected a value");
    l->p += n;
    return 0;
}

// A value of any kind, read over.
static int read_value(Line* l, int depth) {
    if (depth > MAX_DEPTH) return fail(l, "nested too deep");
    skip_space(l);
    if (l->p >= l->end) return fail(l, "expected a value");
    char c = *l->p;
    if (c == '"') return read_string(l, NULL);
    if (c == 't') return read_literal(l, "true");
    if (c == 'f') return read_literal(l, "false");
    if (c == 'n') return read_literal(l, "null");
    if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        l->p++;
        skip_space(l);
        if (l->p < l->end && *l->p == close) { l->p++; return 0; }
        for (;;) {
            if (c == '{' && (read_string(l, NULL) != 0 || expect(l, ':') != 0)) return -1;
            if (read_value(l, depth + 1) != 0) return -1;
            skip_space(l);
            if (l->p < l->end && *l->p == ',') { l->p++; continue; }
            return expect(l, close);
        }
    }
    long long v;
    int whole;
    return read_number(l, &v, &whole);
}

// "endings": an array of exactly CHOICES strings.
static int read_endings(Line* l, ChoiceItem* item) {
    if (expect(l, '[') != 0) return -1;
    int n = 0;
    skip_space(l);
    if (l->p < l->end && *l->p == ']') return fail(l, "\"endings\" is empty, expected 4 strings");
    for (;;) {
        char* s;
        if (read_string(l, &s) != 0) return -1;
        if (n < CHOICES) item->endings[n] = s;
        else free(s);
        n++;
        skip_space(l);
        if (l->p < l->end && *l->p == ',') { l->p++; continue; }
        if (expect(l, ']') != 0) return -1;
        break;
    }
    if (n != CHOICES) {
        char what[64];
        snprintf(what, sizeof(what), "\"endings\" has %d strings, expected %d", n, CHOICES);
        return fail(l, what);
    }
    return 0;
}

// "label": 0..3, as a number or (as some copies of the file have it) a string of one digit.
static int read_label(Line* l, ChoiceItem* item) {
    skip_space(l);
    long long v = -1;
    int whole = 0;
    if (l->p < l->end && *l->p == '"') {
        char* s;
        if (read_string(l, &s) != 0) return -1;
        if (s[0] >= '0' && s[0] <= '9' && s[1] == '\0') v = s[0] - '0', whole = 1;
        free(s);
    } else if (read_number(l, &v, &whole) != 0) {
        return -1;
    }
    if (!whole || v < 0 || v >= CHOICES) return fail(l, "\"label\" is not 0, 1, 2 or 3");
    item->label = (int)v;
    return 0;
}

static void free_item(ChoiceItem* item) {
    free(item->context);
    for (int i = 0; i < CHOICES; i++) free(item->endings[i]);
    memset(item, 0, sizeof(*item));
}

// One line: an object with "ctx", "endings" and "label", each once.
static int read_item(Line* l, ChoiceItem* item) {
    int have_ctx = 0, have_endings = 0, have_label = 0;
    if (expect(l, '{') != 0) return -1;
    skip_space(l);
    if (l->p < l->end && *l->p == '}') l->p++;
    else
        for (;;) {
            char* key;
            if (read_string(l, &key) != 0) return -1;
            int* seen = !strcmp(key, "ctx") ? &have_ctx : !strcmp(key, "endings") ? &have_endings
                      : !strcmp(key, "label") ? &have_label : NULL;
            int status = expect(l, ':');
            if (status == 0 && seen && *seen) {
                char what[64];
                snprintf(what, sizeof(what), "\"%s\" twice", key);
                status = fail(l, what);
            }
            if (status == 0) {
                if (seen == &have_ctx) status = read_string(l, &item->context);
                else if (seen == &have_endings) status = read_endings(l, item);
                else if (seen == &have_label) status = read_label(l, item);
                else status = read_value(l, 1);
            }
            if (seen && status == 0) *seen = 1;
            free(key);
            if (status != 0) return -1;
            skip_space(l);
            if (l->p < l->end && *l->p == ',') { l->p++; continue; }
            if (expect(l, '}') != 0) return -1;
            break;
        }
    skip_space(l);
    if (l->p < l->end) return fail(l, "more after the object");
    const char* missing = !have_ctx ? "ctx" : !have_endings ? "endings" : !have_label ? "label" : NULL;
    if (missing) {
        char what[64];
        snprintf(what, sizeof(what), "no \"%s\"", missing);
        l->p = l->start;
        return fail(l, what);
    }
    return 0;
}

int choice_items_parse(const char* text, size_t len, const char* name, ChoiceItems* out, char* err) {
    out->items = NULL;
    out->n = 0;
    int cap = 0, line_no = 0;
    const char* end = text + len;
    for (const char* p = text; p < end;) {
        const char* e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        line_no++;
        Line l = {p, p, e, ""};
        skip_space(&l);
        if (l.p < e) {
            if (out->n == cap) {
                cap = cap ? 2 * cap : 256;
                ChoiceItem* grown = (ChoiceItem*)realloc(out->items, (size_t)cap * sizeof(ChoiceItem));
                if (!grown) {
                    choice_items_free(out);
                    set_err(err, "%s: out of memory at line %d", name, line_no);
                    return -1;
                }
                out->items = grown;
            }
            ChoiceItem* item = &out->items[out->n];
            memset(item, 0, sizeof(*item));
            l.p = p;
            if (read_item(&l, item) != 0) {
                free_item(item);
                choice_items_free(out);
                set_err(err, "%s:%d: not an item of the HellaSwag layout: %s", name, line_no, l.why);
                return -1;
            }
            item->line = line_no;
            out->n++;
        }
        p = e < end ? e + 1 : end;   // past the line break, where the last line has one
    }
    if (out->n == 0) {
        set_err(err, "%s: no items (one JSON object per line, with \"ctx\", \"endings\" and \"label\")", name);
        return -1;
    }
    return 0;
}

int choice_items_read(const char* path, ChoiceItems* out, char* err) {
    out->items = NULL;
    out->n = 0;
    size_t len;
    unsigned char* text = read_file_at_most(path, MAX_FILE_BYTES, &len, err);
    if (!text) return -1;
    int status = choice_items_parse((const char*)text, len, path, out, err);
    free(text);
    return status;
}

void choice_items_free(ChoiceItems* items) {
    for (int i = 0; i < items->n; i++) free_item(&items->items[i]);
    free(items->items);
    items->items = NULL;
    items->n = 0;
}
