// distributed/ring_transport.h: how the ring attention of context parallelism moves its buffers
// between the ranks of a group: NCCL send/recv with one rank per process, or copies in memory
// with all N ranks in this process on one GPU (simulated: the tests, and --context-parallel
// without a launcher). attention/ring.h declares what the ring calls (AttentionRing.pass and its
// transport); ring_transport_pass is such a function, so attention/ holds no NCCL and this file
// no attention: the program hands one to the other.
#ifndef FLASHGPT_RING_TRANSPORT_H
#define FLASHGPT_RING_TRANSPORT_H

#include <stddef.h>
#include "common/cuda_check.h"
#include "distributed/nccl_comm.h"

// A context-parallel group as this process moves its buffers.
typedef struct {
    int size;          // N ranks in the group
    int first, count;  // the group's ranks held here: one rank (count 1), or all N (in memory)
    NcclComm* comm;    // the group's communicator, with one rank here (set once connected); else NULL
} RingTransport;

// Rank rank_in_group of a group of size ranks, alone in this process: every pass sends to the
// next rank of comm (the group's communicator) and receives from the previous one.
RingTransport ring_transport_over_nccl(NcclComm* comm, int size, int rank_in_group);

// All size ranks of the group here: a pass copies each rank's buffer into the next one's.
RingTransport ring_transport_in_memory(int size);

// Enqueues on stream, for every rank i held by transport (a RingTransport): the next rank's
// buffer `to` receives rank i's buffer `from`, `bytes` each; the buffers of the ranks held here
// lie `stride` bytes apart. The function attention/ring.h's AttentionRing.pass takes.
void ring_transport_pass(void* transport, const void* from, void* to, size_t stride, size_t bytes,
                         cudaStream_t stream);

#endif
