// gpt/model_files.h: what a program that runs a trained model (generate, evaluate) opens before
// the GPU: the checkpoint's shape and architecture, and the tokenizer the model was trained
// with, of the model's vocabulary and, for a model with documents, with the <|endoftext|> that
// starts them. The checkpoint's values are read later (read_model_values, gpt/checkpoint.h),
// once everything else is checked: the long read last.
#ifndef FLASHGPT_GPT_MODEL_FILES_H
#define FLASHGPT_GPT_MODEL_FILES_H

#include "common/output_path.h"
#include "gpt/config.h"
#include "tokenizer/tokenizer.h"

// The checkpoint's shape and architecture into *config and its tokenizer into *tok, each file as
// the program names it (its option and path): 0, or -1 with err naming the option and the file
// that is wrong (a file that cannot be read, a tokenizer of another vocabulary, or one whose
// <|endoftext|> is not the model's document token). A corrupt checkpoint header ends the
// program, naming the file (read_model_shape).
int open_model_files(const ProgramInput* checkpoint, const ProgramInput* tokenizer, GPTConfig* config, Tokenizer** tok,
                     char* err);

#endif
