// common/parse.h: numbers from the command line. Each ends the program with a line naming the
// flag when the text is not a number of the kind asked for.
#ifndef FLASHGPT_PARSE_H
#define FLASHGPT_PARSE_H

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/error.h"

static inline long long parse_integer(const char* flag, const char* s) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) die("%s: '%s' is not an integer", flag, s);
    return v;
}

static inline int parse_int(const char* flag, const char* s) {
    long long v = parse_integer(flag, s);
    if (v < -2147483647LL || v > 2147483647LL) die("%s: %s is out of range", flag, s);
    return (int)v;
}

// An integer from 0 to 2^64 - 1 (strtoull alone would take -1 as 2^64 - 1).
static inline uint64_t parse_u64(const char* flag, const char* s) {
    char* end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (s[strspn(s, " \t\n\v\f\r")] == '-' || errno || end == s || *end)
        die("%s %s: expected an integer from 0 to %llu", flag, s, ULLONG_MAX);
    return (uint64_t)v;
}

// An integer in [lo, hi].
static inline int parse_int_in(const char* flag, const char* s, int lo, int hi) {
    long long v = parse_integer(flag, s);
    if (v < lo || v > hi) die("%s %s: expected an integer from %d to %d", flag, s, lo, hi);
    return (int)v;
}

// A finite float. A value below the normal floats' range is taken as the nearest float that is
// not 0 (1e-45 as 1.4e-45); one that rounds to 0 or past the largest float is refused.
static inline float parse_float(const char* flag, const char* s) {
    char* end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end || isnan(v)) die("%s: '%s' is not a number", flag, s);
    if (isinf(v) && errno != ERANGE) die("%s: '%s' is not a finite number", flag, s);
    if (isinf(v)) die("%s %s: too large for a float (the largest is %g)", flag, s, FLT_MAX);
    if (errno == ERANGE && v == 0.0f)
        die("%s %s: too small for a float (the smallest above 0 is %g)", flag, s, FLT_TRUE_MIN);
    return v;
}

#endif
