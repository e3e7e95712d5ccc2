// tests/unit/distributed/test_nccl.cu: the NCCL collectives of distributed/nccl_comm.h give the expected values:
// world size 1 in this process, and 2 ranks (this program again, as launch_local_ranks starts
// them) when there are 2 GPUs. SKIPPED without a CUDA device, a second GPU, or NCCL.
#include <math.h>
#include <string.h>
#include <vector>

#include "common/cuda_check.h"
#include "distributed/launcher.h"
#include "distributed/nccl_comm.h"
#include "distributed/rendezvous.h"
#include "distributed/zero_shard.h"
#include "tests/lib/device_vectors.h"
#include "tests/lib/test.h"

extern char** environ;

// Small integers times (rank + 1): their mean over W ranks, (W + 1) / 2 times the integer, is
// exact in bf16 for the world sizes tested here.
static float value(size_t i, int rank) { return (float)(i % 13) * (float)(rank + 1); }
static float mean_value(size_t i, int world) { return (float)(i % 13) * (world + 1) / 2.0f; }

static int report(int rank, const char* what, size_t i, float got, float expected) {
    fprintf(stderr, "rank %d: %s element %zu is %g, expected %g\n", rank, what, i, got, expected);
    return 1;
}

// Every collective once on this rank; the number of wrong results (each said on stderr).
static int check_collectives(NcclComm* comm, int rank, int world) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    char err[ERR_LEN];
    ZeroShard s;
    ZeroTensor all = {1000, 1};
    if (zero_shard_init(&s, &all, 1, world, rank, 0, ZERO_SHARD_ALIGN, err) != 0) die("%s", err);
    size_t n = s.padded_count, S = s.shard_size, first = (size_t)rank * S;
    bf16* buf;
    float* fbuf;
    cudaCheck(cudaMalloc(&buf, n * sizeof(bf16)));
    size_t parts_total = 100 * (size_t)world * (world + 1) / 2;   // the broadcasts' below
    cudaCheck(cudaMalloc(&fbuf, (n > parts_total ? n : parts_total) * sizeof(float)));
    int bad = 0;

    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = value(i, rank);
    to_device(buf, h);
    nccl_all_reduce_avg_bf16(comm, buf, n, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    h = from_device(buf, n);
    for (size_t i = 0; i < n && !bad; i++)
        if (h[i] != mean_value(i, world)) bad += report(rank, "all-reduce avg bf16", i, h[i], mean_value(i, world));

    // ZeRO-1's gradients: each rank's chunk reduced to it alone (one reduce per chunk, in a group),
    // against the all-reduce of the same values: bit for bit on 2 ranks (a + b halved exactly), else
    // within a rounding of bf16 per rank added (NCCL may add them in another order). Values of
    // any size, each rank's from a formula the others can compute.
    std::vector<float> exact(n), mine_values(n), magnitudes(n);
    for (size_t i = 0; i < n; i++) {
        double sum = 0.0, magnitude = 0.0;
        for (int q = 0; q < world; q++) {
            float x = __bfloat162float(__float2bfloat16(sinf((float)(i * 7 + q * 1001)) * (1.0f + (float)(i % 17))));
            if (q == rank) mine_values[i] = x;
            sum += x;
            magnitude += fabs(x);
        }
        exact[i] = (float)(sum / world);
        magnitudes[i] = (float)(magnitude / world);   // the bound's scale
    }
    to_device(buf, mine_values);
    nccl_group_begin();
    for (int r = 0; r < world; r++) nccl_reduce_avg_bf16(comm, buf + (size_t)r * S, S, r, stream);
    nccl_group_end();
    cudaCheck(cudaStreamSynchronize(stream));
    std::vector<float> scattered = from_device(buf, n);
    to_device(buf, mine_values);
    nccl_all_reduce_avg_bf16(comm, buf, n, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    std::vector<float> everywhere = from_device(buf, n);
    for (size_t i = first; i < first + S; i++) {
        double rounding = ldexp(1.0, -8);   // bf16's, relative
        double bound = world <= 2 ? 0.0 : (world - 1) * rounding * magnitudes[i] + rounding * fabs(exact[i]);
        if (fabs((double)scattered[i] - everywhere[i]) > bound) {
            bad += report(rank, "reduce to the owner bf16 against the all-reduce", i, scattered[i], everywhere[i]);
            break;
        }
    }

    // ZeRO's parameters: each rank's chunk, gathered in place.
    cudaCheck(cudaMemset(buf, 0, n * sizeof(bf16)));
    std::vector<float> mine(S);
    for (size_t j = 0; j < S; j++) mine[j] = (float)((first + j) % 251);
    to_device(buf + first, mine);
    nccl_all_gather_bf16(comm, buf + first, buf, S, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    h = from_device(buf, n);
    for (size_t i = 0; i < n; i++)
        if (h[i] != (float)(i % 251)) { bad += report(rank, "all-gather bf16", i, h[i], (float)(i % 251)); break; }

    // Parts of different sizes, one broadcast each, in one group: rank r's part is r + 1 chunks
    // of 100 values from (its first chunk) r (r + 1) / 2 on, which it sends out of place from
    // its own array (a checkpoint's fp32 state) and the others receive in place.
    float* fshard;
    size_t part = 100 * (size_t)(rank + 1), at = 100 * (size_t)rank * (rank + 1) / 2;
    size_t total = 100 * (size_t)world * (world + 1) / 2;
    cudaCheck(cudaMalloc(&fshard, part * sizeof(float)));
    std::vector<float> own(part);
    for (size_t j = 0; j < part; j++) own[j] = (float)(at + j);
    cudaCheck(cudaMemcpy(fshard, own.data(), part * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(fbuf, 0xff, total * sizeof(float)));
    nccl_group_begin();
    for (int r = 0; r < world; r++)
        nccl_broadcast(comm, r == rank ? fshard : NULL, fbuf + 100 * (size_t)r * (r + 1) / 2,
                       100 * (size_t)(r + 1) * sizeof(float), r, stream);
    nccl_group_end();
    cudaCheck(cudaStreamSynchronize(stream));
    h.resize(total);
    cudaCheck(cudaMemcpy(h.data(), fbuf, total * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < total; i++)
        if (h[i] != (float)i) { bad += report(rank, "broadcast parts f32", i, h[i], (float)i); break; }

    // The losses (averaged).
    float got[2] = {(float)(rank + 1), 0.5f}, expected[2] = {(world + 1) / 2.0f, 0.5f};
    cudaCheck(cudaMemcpy(fbuf, got, sizeof(got), cudaMemcpyHostToDevice));
    nccl_all_reduce_avg_f32(comm, fbuf, 2, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    cudaCheck(cudaMemcpy(got, fbuf, sizeof(got), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 2; i++)
        if (got[i] != expected[i]) bad += report(rank, "all-reduce avg f32", i, got[i], expected[i]);

    // The squared norms of the ranks' shares (added).
    float norms[2] = {(float)(rank + 1), 0.25f}, norms_sum[2] = {world * (world + 1) / 2.0f, 0.25f * world};
    cudaCheck(cudaMemcpy(fbuf, norms, sizeof(norms), cudaMemcpyHostToDevice));
    nccl_all_reduce_sum_f32(comm, fbuf, 2, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    cudaCheck(cudaMemcpy(norms, fbuf, sizeof(norms), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 2; i++)
        if (norms[i] != norms_sum[i]) bad += report(rank, "all-reduce sum f32", i, norms[i], norms_sum[i]);

    cudaCheck(cudaFree(fshard));
    cudaCheck(cudaFree(fbuf));
    cudaCheck(cudaFree(buf));
    cudaCheck(cudaStreamDestroy(stream));
    return bad;
}

// One rank of the 2-rank case, started by launch_local_ranks.
static int child_main(void) {
    LaunchInfo launch;
    char err[ERR_LEN] = "";
    if (launch_info_parse(environ, &launch, err) != 0) die("%s", err);
    cudaCheck(cudaSetDevice(launch.local_rank));
    NcclComm* comm = nccl_comm_create(&launch, 30.0, err);
    if (!comm) die("%s", err);
    int bad = check_collectives(comm, launch.rank, launch.world_size);
    nccl_comm_destroy(comm);
    return bad ? 1 : 0;
}

int main(int argc, char** argv) {
    if (argc == 2 && strcmp(argv[1], "--child") == 0) return child_main();
    const char* one = "nccl collectives, world size 1";
    const char* two = "nccl collectives, 2 ranks on 2 GPUs";
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        test_skip(one, "no CUDA device");
        test_skip(two, "no CUDA device");
        return test_exit_code();
    }
    if (!nccl_comm_available()) {
        test_skip(one, "this build has no NCCL");
        test_skip(two, "this build has no NCCL");
        return test_exit_code();
    }

    test_begin(one);
    LaunchInfo launch = {"none", 0, 1, 0, "", 0};
    char err[ERR_LEN] = "";
    NcclComm* comm = nccl_comm_create(&launch, RENDEZVOUS_DEFAULT_TIMEOUT_S, err);
    CHECK(comm != NULL, "%s", err);
    if (comm) {
        int bad = check_collectives(comm, 0, 1);
        CHECK(bad == 0, "%d collectives gave wrong values (see above)", bad);
        nccl_comm_destroy(comm);
    }
    test_end();

    if (devices < 2) {
        test_skip(two, "fewer than 2 GPUs");
        return test_exit_code();
    }
    test_begin(two);
    char* child_argv[] = {argv[0], (char*)"--child", NULL};
    CHECK(launch_local_ranks(child_argv, 2, err) == 0, "%s", err);
    test_end();
    return test_exit_code();
}
