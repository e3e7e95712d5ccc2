// common/options.h: a program's command line, read by a table of its options. An entry names an
// option, its value, where the value goes and its line of --help, so a new option is one entry,
// and --help is written from the table. getopt_long reads the command line: a long option may be
// shortened while that stays unambiguous (--gpu for --gpus) and given as --name=value; "--" ends
// the options, so an argument after it is an operand however it starts. Like common/parse.h, a
// wrong command line ends the program with one line naming the argument that is wrong.
// The options that train_gpt, generate and evaluate share are defined once, at the end.
#ifndef FLASHGPT_OPTIONS_H
#define FLASHGPT_OPTIONS_H

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    OPTION_GROUP,   // not an option: the heading of a group of options in --help (flags: its text)
    OPTION_FLAG,    // no value; sets the int target to 1
    OPTION_TEXT,    // the value as it is (const char* target)
    OPTION_PATH,    // a file's or a folder's name (value "DIR": a folder's), not empty (const char* target)
    OPTION_INT,     // an int; from lo to hi when lo < hi
    OPTION_INT64,   // a long long
    OPTION_SEED,    // a uint64_t, 0 to 2^64 - 1
    OPTION_FLOAT,   // a float; from lo to hi when lo < hi (hi INFINITY: at least lo)
    OPTION_CHOICE,  // one of the names in value ("flash|naive"); the int target takes its index
    OPTION_CALL,    // the program's own kind: call(name, value, target) parses and stores it
} OptionKind;

typedef struct {
    OptionKind kind;
    const char* flags;   // as --help shows them, "--steps" or "-B, --batch-size"; errors name the first
    const char* value;   // the value's name in --help ("N"), NULL for none; "[N]": optional, given as
                         // --name=N or as the next argument when that is a number; OPTION_CHOICE:
                         // the names it takes, separated by '|'
    void* target;        // where the value goes
    const char* help;    // its text in --help; a "\n" in it starts a line under the one before
    double lo, hi;       // the range of OPTION_INT and OPTION_FLOAT
    void (*call)(const char* name, const char* value, void* target);   // OPTION_CALL's parser
    int* given;          // set to 1 when the option is given, or NULL
    unsigned char* args; // or, for a program that runs itself again without the option, 1 in each
                         // element (of argc) where the option or its value stands in argv
    int required;        // a missing option ends the program
} Option;

typedef struct {
    const char* program;   // as the errors name it: "(train_gpt --help lists the options)"
    const char* usage;     // the lines of --help before the options
    int column;            // where the help text of the options starts in --help
    const char* operand;   // the arguments after the options ("PROMPT"), or NULL where none are
    const Option* options;
    int count;
} CommandLine;

// Reads argv's options into their targets, the ones not given left as they are; -h or --help
// prints --help and exits 0. Returns the index in argv of the first operand (argc: none); the
// caller says what is wrong with operands it does not take.
int options_parse(const CommandLine* line, int argc, char** argv);

// The options the programs share.
#define OPTION_CHECKPOINT(target) \
    {OPTION_PATH, "--checkpoint", "FILE", &(target), "model checkpoint (train_gpt's model_*.bin)", \
     0, 0, NULL, NULL, NULL, 1}
#define OPTION_MODEL_TOKENIZER(target) \
    {OPTION_PATH, "--tokenizer", "FILE", &(target), "the tokenizer the model was trained with", 0, 0, NULL, NULL, \
     NULL, 1}
#define OPTION_TEMPERATURE(target) \
    {OPTION_FLOAT, "--temperature", "X", &(target), "sampling temperature, 0 for the most likely token [1.0]", 0, \
     INFINITY}
#define OPTION_TOP_K(target) \
    {OPTION_INT, "--top-k", "N", &(target), "sample among the K most likely tokens, 0 for all [0]", 0, 1 << 30}

#ifdef __cplusplus
}
#endif
#endif
