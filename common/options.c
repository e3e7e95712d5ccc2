// common/options.c: reading a command line by its table of options (options.h).
#include "common/options.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/parse.h"

// getopt_long's value for option k of the table: past every letter.
#define LONG_CODE 256

// The long name of an option ("batch-size" of "-B, --batch-size"), and its letter or 0.
static const char* long_name(const Option* o) { return strstr(o->flags, "--") + 2; }
static int letter(const Option* o) { return o->flags[1] != '-' ? o->flags[1] : 0; }

static void print_help(const CommandLine* line) {
    printf("%s", line->usage);
    for (int i = 0; i < line->count; i++) {
        const Option* o = &line->options[i];
        if (o->kind == OPTION_GROUP) {
            printf("%s\n", o->flags);
            continue;
        }
        char left[128];
        snprintf(left, sizeof(left), "%s%s%s", o->flags, o->value ? " " : "", o->value ? o->value : "");
        // An option too long for the column has its text start on the next line.
        if ((int)strlen(left) >= line->column - 2) printf("  %s\n%*s", left, line->column, "");
        else printf("  %-*s", line->column - 2, left);
        for (const char* p = o->help; *p; p++) {
            putchar(*p);
            if (*p == '\n') printf("%*s", line->column, "");
        }
        printf("\n");
    }
    printf("  %-*s%s\n", line->column - 2, "-h, --help", "this text");
}

// The index of value among the '|'-separated names of choices; otherwise the program ends,
// naming them ("expected flash or naive").
static int choice_index(const char* name, const char* choices, const char* value) {
    char expected[256] = "";
    int index = 0, count = 1;
    for (const char* p = choices; *p; p++) count += *p == '|';
    for (const char* p = choices;; index++) {
        size_t len = strcspn(p, "|");
        if (strlen(value) == len && !strncmp(p, value, len)) return index;
        size_t at = strlen(expected);
        snprintf(expected + at, sizeof(expected) - at, "%s%.*s", index == 0 ? "" : index == count - 1 ? " or " : ", ",
                 (int)len, p);
        if (!p[len]) break;
        p += len + 1;
    }
    die("%s %s: expected %s", name, value, expected);
}

// Stores value (NULL: none, for a flag) where option o's goes; name is how errors name it.
static void set_value(const Option* o, const char* name, const char* value) {
    switch (o->kind) {
    case OPTION_GROUP: break;
    case OPTION_FLAG: *(int*)o->target = 1; break;
    case OPTION_TEXT: *(const char**)o->target = value; break;
    case OPTION_PATH:
        if (!*value) die("%s '': the %s name is empty", name, strcmp(o->value, "DIR") == 0 ? "folder" : "file");
        *(const char**)o->target = value;
        break;
    case OPTION_INT:
        *(int*)o->target = o->lo < o->hi ? parse_int_in(name, value, (int)o->lo, (int)o->hi) : parse_int(name, value);
        break;
    case OPTION_INT64: *(long long*)o->target = parse_integer(name, value); break;
    case OPTION_SEED: *(uint64_t*)o->target = parse_u64(name, value); break;
    case OPTION_FLOAT: {
        float v = parse_float(name, value);
        if (o->lo < o->hi && !(v >= o->lo && v <= o->hi)) {
            if (isinf(o->hi)) die("%s %s must be >= %g", name, value, o->lo);
            die("%s %s must be from %g to %g", name, value, o->lo, o->hi);
        }
        *(float*)o->target = v;
        break;
    }
    case OPTION_CHOICE: *(int*)o->target = choice_index(name, o->value, value); break;
    case OPTION_CALL: o->call(name, value, o->target); break;
    }
}

// Ends the program on the option getopt_long did not take: one it does not know (naming the
// argument it stands in: a letter's is the cluster "-xyz" or "-5 degrees" it came in), one
// shortened to what several begin with, or a value given to an option that takes none.
__attribute__((noreturn)) static void refuse(const CommandLine* line, int argc, char** argv) {
    char see[160];
    snprintf(see, sizeof(see), "%s --help lists the options%s%s%s", line->program,
             line->operand ? "; a " : "", line->operand ? line->operand : "",
             line->operand ? " that starts with '-' goes after --" : "");
    if (optopt >= LONG_CODE || optopt == 'h') {
        const char* flags = optopt == 'h' ? "--help" : line->options[optopt - LONG_CODE].flags;
        die("%s takes no value (%s)", strstr(flags, "--"), see);
    }
    if (optopt == 0) {
        const char* arg = argv[optind - 1];
        size_t len = strcspn(arg + 2, "=");
        int matches = 0;
        for (int i = 0; i < line->count && len > 0; i++)
            matches += line->options[i].kind != OPTION_GROUP && !strncmp(long_name(&line->options[i]), arg + 2, len);
        if (matches > 1) die("%.*s is ambiguous: it begins %d options (%s)", (int)len + 2, arg, matches, see);
        die("unknown option %s (%s)", arg, see);
    }
    // The letter ended the argument before optind, or stands in the one at optind.
    const char* before = argv[optind - 1];
    size_t n = strlen(before);
    int ended = before[0] == '-' && n > 1 && before[1] != '-' && before[n - 1] == optopt;
    const char* arg = ended || optind >= argc ? before : argv[optind];
    if (arg[0] == '-' && arg[1] == optopt && !arg[2]) die("unknown option %s (%s)", arg, see);
    die("unknown option -%c in '%s' (%s)", optopt, arg, see);
}

int options_parse(const CommandLine* line, int argc, char** argv) {
    struct option* longs = (struct option*)calloc((size_t)line->count + 2, sizeof(struct option));
    char* letters = (char*)malloc(2 * (size_t)line->count + 3);
    unsigned char* given = (unsigned char*)calloc((size_t)line->count + 1, 1);
    if (!longs || !letters || !given) die("out of host memory");
    int n_longs = 0;
    char* l = letters;
    *l++ = ':';   // a missing value returns ':'
    for (int i = 0; i < line->count; i++) {
        const Option* o = &line->options[i];
        if (o->kind == OPTION_GROUP) continue;
        int has = !o->value ? no_argument : o->value[0] == '[' ? optional_argument : required_argument;
        longs[n_longs++] = (struct option){long_name(o), has, NULL, LONG_CODE + i};
        if (letter(o)) {
            *l++ = (char)letter(o);
            if (has == required_argument) *l++ = ':';
        }
    }
    longs[n_longs] = (struct option){"help", no_argument, NULL, 'h'};
    *l++ = 'h';
    *l = '\0';
    opterr = 0;   // the errors below name the argument
    int code;
    while ((code = getopt_long(argc, argv, letters, longs, NULL)) != -1) {
        if (code == 'h') {
            print_help(line);
            exit(0);
        }
        if (code == ':') die("%s needs a value (%s --help lists the options)", argv[optind - 1], line->program);
        if (code == '?') refuse(line, argc, argv);
        int k = 0;
        if (code >= LONG_CODE) k = code - LONG_CODE;
        else while (letter(&line->options[k]) != code || line->options[k].kind == OPTION_GROUP) k++;
        const Option* o = &line->options[k];
        const char* value = optarg;
        if (o->value && o->value[0] == '[' && !value && optind < argc && argv[optind][0] &&
            strspn(argv[optind], "0123456789") == strlen(argv[optind]))
            value = argv[optind++];
        if (o->args) {
            o->args[optind - 1] = 1;
            if (optarg && optarg == argv[optind - 1]) o->args[optind - 2] = 1;
        }
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(o->flags, ","), o->flags);
        if (!o->value || value) set_value(o, name, value);
        if (o->given) *o->given = 1;
        given[k] = 1;
    }
    for (int i = 0; i < line->count; i++)
        if (line->options[i].required && !given[i])
            die("%s: missing (%s --help)", line->options[i].flags, line->program);
    free(longs);
    free(letters);
    free(given);
    return optind;
}
