// distributed/ranks.cu: the ranks of a run and their groups (distributed/ranks.h).
#include "distributed/ranks.h"

#include <string.h>
#include "distributed/rendezvous.h"

int ranks_plan(Ranks* r, int context_parallel, char* err) {
    extern char** environ;
    memset(r, 0, sizeof(*r));
    if (launch_info_parse(environ, &r->launch, err) != 0) return -1;
    int world = r->launch.world_size, cp = context_parallel, simulated = world == 1;
    r->launched = strcmp(r->launch.launcher, "none") != 0;
    if (world > 1 && !nccl_comm_available()) {
        set_err(err, "%d ranks need NCCL, and this build has none (install NCCL, or set NCCL_HOME, and rebuild)", world);
        return -1;
    }
    // The NCCL ring's communicator is made with the GPU (ranks_connect); until then only the shape counts.
    r->ring = simulated ? ring_transport_in_memory(cp) : ring_transport_over_nccl(NULL, cp, r->launch.rank % cp);
    r->data_rank = simulated ? 0 : r->launch.rank / cp;
    r->data_ranks = simulated ? 1 : world / cp;
    return 0;
}

int ranks_connect(Ranks* r, cudaDeviceProp* prop, char* err) {
    const LaunchInfo* l = &r->launch;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        set_err(err, "no CUDA device");
        return -1;
    }
    if (l->local_rank >= devices) {
        set_err(err, "rank %d is local rank %d, and this node has %d GPU%s", l->rank, l->local_rank, devices,
                devices > 1 ? "s" : "");
        return -1;
    }
    cudaCheck(cudaSetDevice(l->local_rank));
    cudaCheck(cudaGetDeviceProperties(prop, l->local_rank));
    if (!r->launched) return 0;
    if (!(r->comm = nccl_comm_create(l, RENDEZVOUS_DEFAULT_TIMEOUT_S, err))) return -1;
    int cp = r->ring.size;
    if (cp > 1 && l->world_size > 1) {
        r->ring = ring_transport_over_nccl(nccl_comm_split(r->comm, l->rank / cp, l->rank % cp), cp, l->rank % cp);
    }
    return 0;
}

void ranks_free(Ranks* r) {
    if (r->ring.comm) nccl_comm_destroy(r->ring.comm);
    nccl_comm_destroy(r->comm);
}
