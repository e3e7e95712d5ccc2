// tokenizer/pretokenize.h: GPT-2's pre-tokenization, the split of text into the pieces that BPE
// merges never cross. It matches what GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// finds, on UTF-8 bytes: each byte that is not part of a valid UTF-8 sequence counts as a
// character of its own that is neither letter, number nor space, so every byte string splits.
#ifndef FLASHGPT_PRETOKENIZE_H
#define FLASHGPT_PRETOKENIZE_H

#include <stddef.h>

// Byte length (>= 1) of the pre-token that starts at text[0], for len >= 1. The pattern has no
// look-behind, so the pre-tokens of a text are found by calling this at 0 and after each one.
size_t pretoken_len(const unsigned char* text, size_t len);

#endif
