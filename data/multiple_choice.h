// data/multiple_choice.h: multiple-choice items in the layout of HellaSwag's validation file
// (hellaswag_val.jsonl): one JSON object per line with a context "ctx", its four candidate
// "endings" and the index "label" (0-3) of the right one; other keys are read over. A model
// answers an item with the ending it finds most likely after the context.
#ifndef FLASHGPT_MULTIPLE_CHOICE_H
#define FLASHGPT_MULTIPLE_CHOICE_H

#include <stddef.h>
#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CHOICES 4

typedef struct {
    char* context;             // UTF-8, NUL-terminated
    char* endings[CHOICES];
    int label;                 // index of the right ending
    int line;                  // where it is in the file (1-based)
} ChoiceItem;

typedef struct {
    ChoiceItem* items;
    int n;
} ChoiceItems;

// The items of path, every line an item (blank lines are skipped); files above 1 GiB are
// refused. 0 on success, else -1 with err naming the file and line of the first line that is
// not an item of this layout (and nothing to free).
int choice_items_read(const char* path, ChoiceItems* out, char* err);

// The items of a buffer of JSON lines (name stands for the file in messages); the same contract.
int choice_items_parse(const char* text, size_t len, const char* name, ChoiceItems* out, char* err);

void choice_items_free(ChoiceItems* items);

#ifdef __cplusplus
}
#endif
#endif
