// tests/unit/data/test_multiple_choice.c: data/multiple_choice.h, the HellaSwag layout's reader. Real lines
// of that layout (other keys, escapes of every kind, a label as a number or a string) read as
// the items they are; the shipped file tests/data/hellaswag_tiny.jsonl reads whole; and every
// malformed line is refused with its file, line and a reason, never read as something else.
#include <string.h>
#include "data/multiple_choice.h"
#include "tests/lib/test.h"

static int parse(const char* text, ChoiceItems* items, char* err) {
    return choice_items_parse(text, strlen(text), "t.jsonl", items, err);
}

static void test_reads_items(void) {
    test_begin("multiple_choice_reads_items");
    const char* text =
        "{\"ind\": 4, \"activity_label\": \"Removing ice\", \"ctx_a\": \"x\", \"ctx\": \"A man \\\"stands\\\"\","
        " \"endings\": [\"a\", \"b\\n\", \"caf\\u00e9\", \"\\ud83d\\ude00 d\"], \"source_id\": null,"
        " \"split\": \"val\", \"label\": 3, \"nested\": {\"k\": [1, 2.5e-3, true, false]}}\n"
        "\n"
        "  {\"label\": \"1\", \"endings\": [\"1\", \"2\", \"3\", \"4\"], \"ctx\": \"\"}\r\n";
    ChoiceItems items;
    char err[ERR_LEN] = "";
    CHECK(parse(text, &items, err) == 0, "refused: %s", err);
    if (items.n == 2) {
        ChoiceItem* a = &items.items[0];
        CHECK(!strcmp(a->context, "A man \"stands\""), "context %s", a->context);
        CHECK(!strcmp(a->endings[1], "b\n"), "ending 1 %s", a->endings[1]);
        CHECK(!strcmp(a->endings[2], "caf\xc3\xa9"), "ending 2 %s", a->endings[2]);
        CHECK(!strcmp(a->endings[3], "\xf0\x9f\x98\x80 d"), "ending 3 %s", a->endings[3]);
        CHECK(a->label == 3 && a->line == 1, "label %d line %d", a->label, a->line);
        ChoiceItem* b = &items.items[1];
        CHECK(b->label == 1 && b->line == 3 && b->context[0] == '\0', "label %d line %d", b->label, b->line);
    } else {
        CHECK(0, "%d items, expected 2", items.n);
    }
    if (items.n) choice_items_free(&items);
    test_end();
}

static void test_shipped_file(void) {
    test_begin("multiple_choice_reads_the_shipped_file");
    ChoiceItems items;
    char err[ERR_LEN] = "";
    CHECK(choice_items_read("tests/data/hellaswag_tiny.jsonl", &items, err) == 0, "refused: %s", err);
    if (items.n) {
        int labels[CHOICES] = {0};
        for (int i = 0; i < items.n; i++) labels[items.items[i].label]++;
        CHECK(items.n >= 20, "%d items", items.n);
        for (int k = 0; k < CHOICES; k++) CHECK(labels[k] > 0, "no item has label %d", k);
        choice_items_free(&items);
    }
    test_end();
}

static void test_refusals(void) {
    test_begin("multiple_choice_refuses_malformed_lines");
    const char* good = "{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}\n";
    const struct { const char* line; const char* reason; } bad[] = {
        {"not json", "expected '{'"},
        {"{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\"], \"label\": 0}", "has 3 strings"},
        {"{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\", \"e\"], \"label\": 0}", "has 5 strings"},
        {"{\"ctx\": \"c\", \"endings\": [], \"label\": 0}", "is empty"},
        {"{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 4}", "\"label\" is not"},
        {"{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 1.5}", "\"label\" is not"},
        {"{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": \"x\"}", "\"label\" is not"},
        {"{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\"]}", "no \"label\""},
        {"{\"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}", "no \"ctx\""},
        {"{\"ctx\": \"c\", \"label\": 0}", "no \"endings\""},
        {"{\"ctx\": \"c\", \"ctx\": \"d\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}", "\"ctx\" twice"},
        {"{\"ctx\": \"c, \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}", "expected '}'"},
        {"{\"ctx\": \"unterminated", "unterminated string"},
        {"{\"ctx\": \"bad \\q escape\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}", "unknown escape"},
        {"{\"ctx\": \"\\ud83d alone\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}", "lone surrogate"},
        {"{\"ctx\": \"\\u12\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}", "4 hex digits"},
        {"{\"ctx\": 3, \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}", "expected a string"},
        {"{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0} trailing", "more after"},
        {"{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0, \"x\": tru}", "expected a value"},
        {"[1, 2]", "expected '{'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        // The bad line is line 2, after a good one.
        char text[512];
        snprintf(text, sizeof(text), "%s%s\n", good, bad[i].line);
        ChoiceItems items;
        char err[ERR_LEN] = "";
        int status = parse(text, &items, err);
        CHECK(status != 0, "accepted: %s", bad[i].line);
        if (status == 0) { choice_items_free(&items); continue; }
        CHECK(strstr(err, "t.jsonl:2: ") == err, "no file and line in '%s'", err);
        CHECK(strstr(err, bad[i].reason) != NULL, "'%s' does not say '%s'", err, bad[i].reason);
        CHECK(strchr(err, '\n') == NULL, "'%s' is more than one line", err);
    }
    ChoiceItems items;
    char err[ERR_LEN] = "";
    CHECK(parse("\n  \n", &items, err) != 0 && strstr(err, "no items"), "a file of blank lines: '%s'", err);
    CHECK(choice_items_read("tests/data/no_such_file.jsonl", &items, err) != 0 && strstr(err, "no_such_file"),
          "a missing file: '%s'", err);
    test_end();
}

int main(void) {
    test_reads_items();
    test_shipped_file();
    test_refusals();
    return test_exit_code();
}
