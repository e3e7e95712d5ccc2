// distributed/ranks.h: the ranks of a run as this process takes part in them: who it is (from its
// launcher's environment, distributed/launcher.h), its GPU (the one of its local rank), the NCCL
// communicator of every rank, and the context-parallel groups: N consecutive ranks share each
// sequence through the ring of attention/ring.h, which moves its buffers by the group's
// transport (distributed/ring_transport.h), and each group reads its own part of the data.
// Without a launcher the N ranks of the one group run on this process's GPU (simulated: the
// ring's moves are copies in memory).
#ifndef FLASHGPT_RANKS_H
#define FLASHGPT_RANKS_H

#include "distributed/launcher.h"
#include "distributed/nccl_comm.h"
#include "distributed/ring_transport.h"

typedef struct {
    LaunchInfo launch;           // this rank among the ranks (rank 0 of 1 without a launcher)
    int launched;                // started by a launcher: its ranks have a communicator
    RingTransport ring;          // this rank's context-parallel group (size 1: none); its comm,
                                 // with one rank per process, once connected
    int data_rank, data_ranks;   // whose part of the data: the group's, among the groups
    NcclComm* comm;              // of every rank, once connected; NULL without a launcher
} Ranks;

// The ranks from this process's environment, in groups of context_parallel (under a launcher a
// divisor of the ranks, which the caller checks: plan_run), before any GPU is taken: 0, or
// -1 with err (the launcher's variables, or several ranks in a build without NCCL).
int ranks_plan(Ranks* r, int context_parallel, char* err);

// Takes this rank's GPU (its properties into *prop) and, under a launcher, makes the
// communicators (every rank calls it): 0, or -1 with err ("no CUDA device", a local rank past
// the node's GPUs, a rendezvous that fails).
int ranks_connect(Ranks* r, cudaDeviceProp* prop, char* err);

void ranks_free(Ranks* r);

#endif
