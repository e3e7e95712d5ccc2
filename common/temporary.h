// common/temporary.h: the temporary siblings that files and folders are written through
// (PATH.tmpPID, renamed over PATH once complete). A process's own temporaries are removed when
// it exits without completing them or SIGINT or SIGTERM ends it, and those left by dead processes (SIGKILL, a crash) when the next
// writer of the same path starts.
#ifndef FLASHGPT_TEMPORARY_H
#define FLASHGPT_TEMPORARY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Writes PATH.tmpPID into out (len bytes) and removes PATH.tmpN of dead processes N.
// 0, or -1 with err.
int temporary_name(const char* path, char* out, size_t len, char* err);

// Removes tmp (a file, or a folder of files) should SIGINT or SIGTERM end the process, until
// temporary_release(tmp); the handlers are installed on first use where the program has none.
// Holds a few at once; beyond that a temporary is only left for the next writer to remove.
void temporary_hold(const char* tmp);
void temporary_release(const char* tmp);

// Removes every temporary held now; async-signal-safe, for a program's own fatal-signal handler.
void temporary_remove_held(void);

// Removes a file, or a folder and the files in it (not deeper). 0, or -1 with errno set.
int temporary_remove(const char* path);

#ifdef __cplusplus
}
#endif
#endif
