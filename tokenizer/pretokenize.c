// tokenizer/pretokenize.c: GPT-2's pre-tokenization pattern as a hand-written scanner over UTF-8
// (see pretokenize.h); character classes come from unicode_tables.h.
#include <stdint.h>
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode_tables.h"

enum { CLASS_LETTER, CLASS_NUMBER, CLASS_SPACE, CLASS_OTHER };

typedef struct {
    int cls;
    size_t len;   // bytes
} Char;

static int in_ranges(const UnicodeRange* r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].first) hi = mid;
        else if (cp > r[mid].last) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static int codepoint_class(uint32_t cp) {
    if (in_ranges(unicode_letters, sizeof unicode_letters / sizeof *unicode_letters, cp)) return CLASS_LETTER;
    if (in_ranges(unicode_numbers, sizeof unicode_numbers / sizeof *unicode_numbers, cp)) return CLASS_NUMBER;
    if (in_ranges(unicode_white_space, sizeof unicode_white_space / sizeof *unicode_white_space, cp)) return CLASS_SPACE;
    return CLASS_OTHER;
}

static int ascii_class(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CLASS_LETTER;
    if (c >= '0' && c <= '9') return CLASS_NUMBER;
    if (c == ' ' || (c >= '\t' && c <= '\r')) return CLASS_SPACE;
    return CLASS_OTHER;
}

static int is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The character at s[0] (n >= 1). Only well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF) decodes; any other byte is a one-byte character of class OTHER.
static Char next_char(const unsigned char* s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return (Char){ascii_class(c), 1};
    Char invalid = {CLASS_OTHER, 1};
    if (c >= 0xC2 && c <= 0xDF) {
        if (n < 2 || !is_continuation(s[1])) return invalid;
        return (Char){codepoint_class(((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F)), 2};
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || !is_continuation(s[1]) || !is_continuation(s[2])) return invalid;
        if (c == 0xE0 && s[1] < 0xA0) return invalid;   // overlong
        if (c == 0xED && s[1] > 0x9F) return invalid;   // surrogate
        uint32_t cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return (Char){codepoint_class(cp), 3};
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || !is_continuation(s[1]) || !is_continuation(s[2]) || !is_continuation(s[3])) return invalid;
        if (c == 0xF0 && s[1] < 0x90) return invalid;   // overlong
        if (c == 0xF4 && s[1] > 0x8F) return invalid;   // above U+10FFFF
        uint32_t cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                      ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return (Char){codepoint_class(cp), 4};
    }
    return invalid;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd, lower case only) at s, or 0.
static size_t contraction_len(const unsigned char* s, size_t n) {
    if (n < 2 || s[0] != '\'') return 0;
    if (s[1] == 's' || s[1] == 't' || s[1] == 'm' || s[1] == 'd') return 2;
    if (n >= 3 && ((s[1] == 'r' && s[2] == 'e') || (s[1] == 'v' && s[2] == 'e') ||
                   (s[1] == 'l' && s[2] == 'l'))) return 3;
    return 0;
}

size_t pretoken_len(const unsigned char* s, size_t n) {
    size_t len = contraction_len(s, n);
    if (len) return len;

    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a run of one class, maybe after one ' '.
    size_t start = 0;
    Char c = next_char(s, n);
    if (s[0] == ' ' && n > 1) {
        Char after = next_char(s + 1, n - 1);
        if (after.cls != CLASS_SPACE) { start = 1; c = after; }
    }
    if (c.cls != CLASS_SPACE) {
        size_t end = start + c.len;
        while (end < n) {
            Char d = next_char(s + end, n - end);
            if (d.cls != c.cls) break;
            end += d.len;
        }
        return end;
    }

    // "\s+(?!\S)" then "\s+": a white space run that reaches the end of the text is taken whole;
    // one followed by something else gives up its last character (which then prefixes the next
    // pre-token when it is ' '), unless that would leave it empty.
    size_t end = 0, last_start = 0;
    while (end < n) {
        Char d = next_char(s + end, n - end);
        if (d.cls != CLASS_SPACE) break;
        last_start = end;
        end += d.len;
    }
    if (end < n && last_start > 0) return last_start;
    return end;
}
