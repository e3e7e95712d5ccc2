// distributed/nccl_comm.h: the NCCL communicator of all ranks and the collectives the trainer
// runs on it. Every call takes the stream it is ordered on. A build without NCCL has the same
// functions: nccl_comm_create fails saying so, so no other call can be reached.
#ifndef FLASHGPT_NCCL_COMM_H
#define FLASHGPT_NCCL_COMM_H

#include <stddef.h>
#include "common/cuda_check.h"
#include "distributed/launcher.h"

typedef struct NcclComm NcclComm;

// 1 when this build has NCCL: a launch of several ranks can be refused before it starts.
int nccl_comm_available(void);

// The communicator of launch->world_size ranks on the current device (cudaSetDevice first,
// usually to launch->local_rank): rank 0 makes the NCCL unique id and hands it to the others
// through the rendezvous (timeout_s; RENDEZVOUS_DEFAULT_TIMEOUT_S). Returns NULL with err when
// the rendezvous fails or this build has no NCCL; NCCL's own failures end the program (die).
NcclComm* nccl_comm_create(const LaunchInfo* launch, double timeout_s, char* err);
void nccl_comm_destroy(NcclComm* comm);

// The communicator of the ranks that give the same color, ranked by key (context-parallel
// groups inside the world); every rank of comm calls it.
NcclComm* nccl_comm_split(NcclComm* comm, int color, int key);

// One step of a ring: send (bytes) to rank `to` while receiving recv (bytes) from rank `from`.
void nccl_send_recv(NcclComm* comm, const void* send, void* recv, size_t bytes, int to, int from,
                    cudaStream_t stream);

// The collectives called between these two go out as one launch (a layer's gradient tensors).
void nccl_group_begin(void);
void nccl_group_end(void);

// In place: buf (n) = the mean of buf over the ranks (data-parallel gradients).
void nccl_all_reduce_avg_bf16(NcclComm* comm, bf16* buf, size_t n, cudaStream_t stream);

// In place on rank root alone: buf (n) = the mean of buf over the ranks; the others' buf is read
// only. Between nccl_group_begin and _end, one per piece with each piece's owner as root: ZeRO-1's
// reduce-scatter of gradients in pieces of any size.
void nccl_reduce_avg_bf16(NcclComm* comm, bf16* buf, size_t n, int root, cudaStream_t stream);

// full (world_size * shard_size) = every rank's shard, in rank order; in place when
// shard == full + rank * shard_size: the parameters after the sharded AdamW step.
void nccl_all_gather_bf16(NcclComm* comm, const bf16* shard, bf16* full, size_t shard_size,
                          cudaStream_t stream);

// recv (bytes) on every rank = send (bytes) of rank root (send is read on root only; in place
// when send == recv): between nccl_group_begin and _end, one per part, the gather of parts of
// different sizes (the parameters after a Muon step sharded by matrices; the optimizer state
// for a checkpoint).
void nccl_broadcast(NcclComm* comm, const void* send, void* recv, size_t bytes, int root, cudaStream_t stream);

// In place on device memory: buf (n) = the mean over the ranks (the losses the trainer prints).
void nccl_all_reduce_avg_f32(NcclComm* comm, float* buf, size_t n, cudaStream_t stream);
// In place on device memory: buf (n) = the sum over the ranks (the squared norms of the ranks'
// shares of the gradients).
void nccl_all_reduce_sum_f32(NcclComm* comm, float* buf, size_t n, cudaStream_t stream);

#endif
