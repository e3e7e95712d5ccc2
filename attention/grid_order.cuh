// attention/grid_order.cuh: the order in which the wgmma kernels' thread blocks take their tiles.
// A tile is (rank, bh): rank 0 is the longest tile of a head (causal: the last Q block of the
// forward, the first K/V block of the backward), and the grid issues the long ones first so that
// the short ones fill the tail. Across heads, the grid goes through the heads in groups, all
// ranks of a group before the next group: every thread block of a head streams the same K and V
// (forward) or Q, dO and dQ (backward), so L2 keeps them for the blocks that come later only
// while few heads are in flight. Without groups, once the first blocks finish the blocks in
// flight spread over every head, their tensors no longer fit in L2, and each block reads them
// from DRAM again (HS 64 forward at T = 32K: 2.1 GB read from DRAM, 0.2 GB with groups sized by
// L2). Less DRAM traffic is less power: in the trainer, at the GPU's power cap at long T, the
// clock rises.
#ifndef FLASHGPT_GRID_ORDER_CUH
#define FLASHGPT_GRID_ORDER_CUH

#include "common/cuda_check.h"

struct GridTile {
    int rank;   // 0 = the head's longest tile
    int bh;     // batch * NH + head
};

// The tile of thread block `block` of a grid of n_ranks * BH blocks, heads in groups of `group`
// (the last group may be smaller).
__host__ __device__ __forceinline__ GridTile grid_tile(int block, int n_ranks, int BH, int group) {
    int per_group = n_ranks * group;
    int first = block / per_group * group, size = BH - first < group ? BH - first : group;
    int r = block % per_group;   // every group before this one is full
    return {r / size, first + r % size};
}

// Heads per group, for a grid of n_ranks tiles per head of which blocks_per_sm run on each SM at
// once. As many as keep a group's tensors (bytes_per_head each) within a quarter of L2, so that
// the group being finished and the next fit together; and at least as many as keep the grid's
// balance: causal tiles of n_ranks ... 1 steps, so G heads are G n_ranks^2 / 2 steps over the P
// blocks in flight, which must well outlast the longest tile (n_ranks steps), or the grid ends
// waiting for the long tiles of its last group: G >= 4 P / n_ranks. Then the groups are evened
// out, so that the last one is not much smaller than the others.
static inline int grid_head_group(size_t bytes_per_head, int BH, int n_ranks, int blocks_per_sm) {
    static int l2_bytes = 0, sms = 0;
    if (!l2_bytes) {
        int device;
        cudaCheck(cudaGetDevice(&device));
        cudaCheck(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    }
    long long by_l2 = (long long)l2_bytes / 4 / (long long)(bytes_per_head > 0 ? bytes_per_head : 1);
    long long by_balance = ceil_div(4LL * sms * blocks_per_sm, n_ranks);
    long long group = by_l2 > by_balance ? by_l2 : by_balance;
    if (group >= BH) return BH;
    long long n_groups = ceil_div(BH, group);
    return (int)ceil_div(BH, n_groups);
}

#endif
