// distributed/ring_transport.h: how the ring attention of context parallelism (attention/ring.h)
// moves its buffers between the ranks of a group: NCCL send/recv with one rank per process, or
// copies in memory with all N ranks in this process on one GPU (simulated: the tests, and
// --context-parallel without a launcher). attention/ holds no NCCL; this is where it comes in.
#ifndef FLASHGPT_RING_TRANSPORT_H
#define FLASHGPT_RING_TRANSPORT_H

#include "attention/ring.h"
#include "distributed/nccl_comm.h"

// Rank rank_in_group of a group of size ranks, alone in this process: every pass sends to the
// next rank of comm (the group's communicator) and receives from the previous one.
AttentionRing ring_over_nccl(NcclComm* comm, int size, int rank_in_group);

// All size ranks of the group here: a pass copies each rank's buffer into the next one's.
AttentionRing ring_in_memory(int size);

#endif
