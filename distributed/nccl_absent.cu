// distributed/nccl_absent.cu: nccl_comm.h for a build without NCCL (nccl.h and libnccl were not
// found): making the communicator fails with the reason, so the collectives are never reached.
#include "distributed/nccl_comm.h"

int nccl_comm_available(void) { return 0; }

NcclComm* nccl_comm_create(const LaunchInfo* launch, double timeout_s, char* err) {
    set_err(err, "%d ranks need NCCL, and this build has none (install NCCL, or set NCCL_HOME, "
            "and rebuild)", launch->world_size);
    return NULL;
}

__attribute__((noreturn)) static void unreachable(void) { die("NCCL collective called in a build without NCCL"); }

void nccl_comm_destroy(NcclComm* comm) {}
void nccl_group_begin(void) { unreachable(); }
NcclComm* nccl_comm_split(NcclComm*, int, int) { unreachable(); }
void nccl_send_recv(NcclComm*, const void*, void*, size_t, int, int, cudaStream_t) { unreachable(); }
void nccl_group_end(void) { unreachable(); }
void nccl_all_reduce_avg_bf16(NcclComm*, bf16*, size_t, cudaStream_t) { unreachable(); }
void nccl_reduce_avg_bf16(NcclComm*, bf16*, size_t, int, cudaStream_t) { unreachable(); }
void nccl_all_gather_bf16(NcclComm*, const bf16*, bf16*, size_t, cudaStream_t) { unreachable(); }
void nccl_broadcast(NcclComm*, const void*, void*, size_t, int, cudaStream_t) { unreachable(); }
void nccl_all_reduce_avg_f32(NcclComm*, float*, size_t, cudaStream_t) { unreachable(); }
void nccl_all_reduce_sum_f32(NcclComm*, float*, size_t, cudaStream_t) { unreachable(); }
