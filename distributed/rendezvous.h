// distributed/rendezvous.h: the ranks meet over TCP and rank 0 hands every other rank a blob of
// bytes (the NCCL unique id), after checking that all of them agree on the world size and that
// each rank arrives once. Every failure (a rank that never arrives, a port in use, a wrong world
// size, a duplicate rank, rank 0 included) ends every rank that can be reached with one line,
// within a time-out; a connection that sends nothing delays no one.
#ifndef FLASHGPT_RENDEZVOUS_H
#define FLASHGPT_RENDEZVOUS_H

#include <stddef.h>
#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RENDEZVOUS_DEFAULT_TIMEOUT_S 120.0
#define RENDEZVOUS_MAX_BLOB 4096

// Rank 0 listens on master_port (on loopback only when master_addr is a loopback address,
// else on every interface, as the others reach it by a name it may not know itself), waits
// for ranks 1 .. world_size-1 for up to timeout_s, then sends each of them blob.
// The other ranks connect to master_addr:master_port, retrying until timeout_s, say their rank,
// the world size and the blob size they expect, and receive blob; they wait up to twice
// timeout_s for the answer, so that rank 0's own time-out reaches them first, with its reason.
// A rank 0 that finds master_port taken asks the holder (up to 1 s, within timeout_s) whether it
// is a rank 0 too: then both fail, and every rank that arrived, saying that rank 0 arrived twice.
// rank 0 passes the blob, the others a buffer of blob_len bytes to fill. world_size 1 returns
// at once. Returns 0, or -1 with err (on rank 0's refusal: rank 0's reason, on every rank, its
// control characters replaced by spaces).
int rendezvous(const char* master_addr, int master_port, int rank, int world_size, void* blob,
               size_t blob_len, double timeout_s, char* err);

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick), or -1 with err.
int rendezvous_free_port(char* err);

#ifdef __cplusplus
}
#endif

#endif
