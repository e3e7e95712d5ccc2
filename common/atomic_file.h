// common/atomic_file.h: every file the project writes goes to a temporary sibling first and is
// renamed over its path once complete and on disk, so a reader or a crash sees the old file or
// the whole new one; a folder of files that belong together (a dataset) is made the same way.
// A symbolic link is followed (the file it names is replaced, the link stays); a path that
// names a device, a FIFO or a socket, or a file only through a link that gives no path to it
// (/dev/stdout or /proc/self/fd/N on a pipe or a deleted file), is written in place, never
// renamed over; a directory is refused.
#ifndef FLASHGPT_ATOMIC_FILE_H
#define FLASHGPT_ATOMIC_FILE_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// Says whether path could be written, without writing: for a program to check its outputs
// before long work. 0, or -1 with err.
int atomic_check(const char* path, char* err);

// The stream to write path's new content to, and in tmp (tmp_len bytes) the temporary it goes
// to ("" when path is written in place), or NULL with err.
FILE* atomic_open(const char* path, char* tmp, size_t tmp_len, char* err);

// ok says whether every write to f succeeded. Flushes f to disk and renames it into place;
// otherwise removes it. 0, or -1 with err.
int atomic_close(FILE* f, const char* tmp, const char* path, int ok, char* err);

// Says whether a new folder could be put at path (a folder or a path not yet made) in one
// step, without making anything: for a program to check before long work. path is taken with
// its symbolic links followed and its "." and ".." resolved; the folder may not be a mount point
// (another file system, or a bind mount: nothing can be renamed over one), nor the current
// folder or one above it (a shell in it would be left in a removed folder), and it and the
// nearest existing folder above it must be writable. 0, or -1 with err.
int atomic_dir_check(const char* path, char* err);

// After the checks of atomic_dir_check, a new, empty temporary folder beside the folder path
// (its name into tmp, tmp_len bytes), the folders above path made if missing. Where a folder is
// at path, the new one takes its group and owner where the process may give them, and its mode
// (setgid bit included) but that its owner may write in it. 0, or -1 with err.
int atomic_dir_open(const char* path, char* tmp, size_t tmp_len, char* err);

// ok says whether the folder tmp was completed. Gives it the exact mode of the folder at path,
// puts it at path in one step, then removes the folder that was there; otherwise removes tmp.
// 0, or -1 with err.
int atomic_dir_close(const char* tmp, const char* path, int ok, char* err);

#ifdef __cplusplus
}
#endif
#endif
