// common/output_path.h: where a program's outputs go, checked before the long work: a folder
// that exists or can be made (the checkpoint folder, a log's folder), a file that can be written
// in place (a log, appended to), and the rule of every output, that it is none of the program's
// inputs (a file written over would be lost). atomic_file.h checks the files written through a
// temporary.
#ifndef FLASHGPT_OUTPUT_PATH_H
#define FLASHGPT_OUTPUT_PATH_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// Whether the folder dir exists or could be made, and files could be written in it, without
// making anything: each part of it that exists is a folder and the deepest one is writable.
// 0, or -1 with err saying what is wrong (the caller names dir).
int check_dirs(const char* dir, char* err);

// Makes dir and its parents. 0, or -1 with err (the caller names dir).
int make_dirs(const char* dir, char* err);

// The folder a file path is in: the part before its last '/', "." without one.
void folder_of(const char* path, char* dir, size_t len);

// Whether the file path could be opened for writing in place, its folders made if missing
// (make_dirs), without making anything: a file name (not empty, not ending in '/'), not a
// folder, writable if it exists, else in a folder that check_dirs accepts. 0, or -1 with err
// beginning with path.
int check_output_file(const char* path, char* err);

// The file check_output_file accepted, opened for writing in place, its folders made (make_dirs):
// appended to when append is set and the file holds something (then *appended is 1), else new or
// emptied. NULL with err beginning with path.
FILE* open_output_file(const char* path, int append, int* appended, char* err);

// 1 when a and b both exist and are one file or folder however each is spelled (a symbolic or
// hard link, another path to it), else 0.
int same_file(const char* a, const char* b);

// path as an absolute path without links, "." or ".." parts or repeated '/', whether or not it
// exists: the real path of its deepest part that exists, then the rest as written (a part that
// does not exist is no link), so that two spellings of one output compare equal before either is
// made. 0, or -1 with err (the caller names path).
int resolve_path(const char* path, char* out, size_t len, char* err);

// An input of a program: the option that names it and its path, or with pattern set a glob whose
// every match is an input (as the data loader reads shards); a NULL path is no input.
typedef struct {
    const char* flag;
    const char* path;
    int pattern;
} ProgramInput;

// 0 unless the file output names exists and is one of the n inputs (same_file): then -1 with err
// "OUTPUT: is the input FLAG PATH (not overwritten)".
int check_output_not_input(const char* output, const ProgramInput* inputs, int n, char* err);

#ifdef __cplusplus
}
#endif
#endif
