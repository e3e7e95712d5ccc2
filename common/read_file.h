// common/read_file.h: reading a whole file into memory, for the tokenizer, the data tools and the programs.
#ifndef FLASHGPT_READ_FILE_H
#define FLASHGPT_READ_FILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The file's bytes in a malloc'd buffer (with one extra 0 byte after them) and their count in
// *len, or NULL with err naming path.
unsigned char* read_file(const char* path, size_t* len, char* err);

#ifdef __cplusplus
}
#endif
#endif
