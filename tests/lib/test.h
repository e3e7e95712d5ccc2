// tests/lib/test.h: the small harness every test program uses (C and CUDA C++ alike).
// A program runs named cases; each prints one line that tests/run_tests.sh counts:
//   PASS name | FAIL name: why | SKIPPED name (why)
// Inside a case, CHECK records a failure and goes on, so one run shows every broken check.
#ifndef FLASHGPT_TEST_H
#define FLASHGPT_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include "common/error.h"
#include "common/read_file.h"

static const char* test_case_name = NULL;
static int test_case_failures = 0;
static int test_total_failures = 0;

static inline void test_begin(const char* name) {
    test_case_name = name;
    test_case_failures = 0;
}

// Prints the FAIL line on the first failure of a case, then indented details.
static inline void test_fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (test_case_failures == 0) printf("FAIL %s: ", test_case_name);
    else printf("    also: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    test_case_failures++;
    fflush(stdout);
}

static inline void test_end(void) {
    if (test_case_failures == 0) printf("PASS %s\n", test_case_name);
    else test_total_failures++;
    fflush(stdout);
    test_case_name = NULL;
}

static inline void test_skip(const char* name, const char* why) {
    printf("SKIPPED %s (%s)\n", name, why);
    fflush(stdout);
}

// Exit status of a test program: non-zero when any case failed.
static inline int test_exit_code(void) { return test_total_failures ? 1 : 0; }

#define CHECK(cond, ...) do { if (!(cond)) { test_fail(__VA_ARGS__); } } while (0)

// Where the runner says things are: generated reference data, scratch space, tinyshakespeare.
static inline const char* test_env(const char* name, const char* fallback) {
    const char* v = getenv(name);
    return (v && *v) ? v : fallback;
}

// The test text (TEST_TEXT, passed as FLASHGPT_TEXT) and its length, or NULL after a SKIPPED
// line for the case called name saying why it cannot be read.
static inline unsigned char* test_text(const char* name, size_t* len) {
    char err[ERR_LEN], why[ERR_LEN + 32];
    unsigned char* text = read_file(test_env("FLASHGPT_TEXT", "build/texts/tinyshakespeare.txt"), len, err);
    if (text) return text;
    snprintf(why, sizeof why, "no TEST_TEXT: %s", err);
    test_skip(name, why);
    return NULL;
}

#endif
