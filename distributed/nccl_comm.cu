// distributed/nccl_comm.cu: the NCCL communicator made from the rendezvous, and the
// collectives on it. The one file that calls NCCL.
#include "distributed/nccl_comm.h"

#include <nccl.h>
#include "distributed/rendezvous.h"

static inline void nccl_check(ncclResult_t r, const char* file, int line) {
    if (r != ncclSuccess) die("NCCL: %s at %s:%d", ncclGetErrorString(r), file, line);
}
#define ncclCheck(call) nccl_check((call), __FILE__, __LINE__)

struct NcclComm {
    ncclComm_t comm;
    int rank;
    int world_size;
};

int nccl_comm_available(void) { return 1; }

NcclComm* nccl_comm_create(const LaunchInfo* launch, double timeout_s, char* err) {
    ncclUniqueId id;
    if (launch->rank == 0) ncclCheck(ncclGetUniqueId(&id));
    if (rendezvous(launch->master_addr, launch->master_port, launch->rank, launch->world_size,
                   &id, sizeof(id), timeout_s, err) != 0)
        return NULL;
    NcclComm* c = (NcclComm*)malloc(sizeof(NcclComm));
    if (!c) {
        set_err(err, "out of memory for the NCCL communicator");
        return NULL;
    }
    c->rank = launch->rank;
    c->world_size = launch->world_size;
    ncclCheck(ncclCommInitRank(&c->comm, c->world_size, id, c->rank));
    return c;
}

void nccl_comm_destroy(NcclComm* comm) {
    if (!comm) return;
    ncclCheck(ncclCommDestroy(comm->comm));
    free(comm);
}

NcclComm* nccl_comm_split(NcclComm* comm, int color, int key) {
    NcclComm* c = (NcclComm*)calloc(1, sizeof(NcclComm));
    if (!c) die("out of memory for an NCCL communicator");
    ncclCheck(ncclCommSplit(comm->comm, color, key, &c->comm, NULL));
    ncclCheck(ncclCommUserRank(c->comm, &c->rank));
    ncclCheck(ncclCommCount(c->comm, &c->world_size));
    return c;
}


void nccl_send_recv(NcclComm* comm, const void* send, void* recv, size_t bytes, int to, int from,
                    cudaStream_t stream) {
    ncclCheck(ncclGroupStart());
    ncclCheck(ncclSend(send, bytes, ncclUint8, to, comm->comm, stream));
    ncclCheck(ncclRecv(recv, bytes, ncclUint8, from, comm->comm, stream));
    ncclCheck(ncclGroupEnd());
}

void nccl_group_begin(void) { ncclCheck(ncclGroupStart()); }
void nccl_group_end(void) { ncclCheck(ncclGroupEnd()); }

void nccl_all_reduce_avg_bf16(NcclComm* comm, bf16* buf, size_t n, cudaStream_t stream) {
    ncclCheck(ncclAllReduce(buf, buf, n, ncclBfloat16, ncclAvg, comm->comm, stream));
}

void nccl_reduce_avg_bf16(NcclComm* comm, bf16* buf, size_t n, int root, cudaStream_t stream) {
    ncclCheck(ncclReduce(buf, buf, n, ncclBfloat16, ncclAvg, root, comm->comm, stream));
}

void nccl_all_gather_bf16(NcclComm* comm, const bf16* shard, bf16* full, size_t shard_size,
                          cudaStream_t stream) {
    ncclCheck(ncclAllGather(shard, full, shard_size, ncclBfloat16, comm->comm, stream));
}

void nccl_broadcast(NcclComm* comm, const void* send, void* recv, size_t bytes, int root, cudaStream_t stream) {
    ncclCheck(ncclBroadcast(send, recv, bytes, ncclUint8, root, comm->comm, stream));
}

void nccl_all_reduce_avg_f32(NcclComm* comm, float* buf, size_t n, cudaStream_t stream) {
    ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat32, ncclAvg, comm->comm, stream));
}

void nccl_all_reduce_sum_f32(NcclComm* comm, float* buf, size_t n, cudaStream_t stream) {
    ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm->comm, stream));
}
