// tests/test_nccl.cu: the NCCL collectives of distributed/nccl_comm.h give the expected values:
// world size 1 in this process, and 2 ranks (this program again, as launch_local_ranks starts
// them) when there are 2 GPUs. SKIPPED without a CUDA device, a second GPU, or NCCL.
#include <string.h>
#include <vector>

#include "common/cuda_check.h"
#include "distributed/launcher.h"
#include "distributed/nccl_comm.h"
#include "distributed/rendezvous.h"
#include "distributed/zero_shard.h"
#include "tests/test.h"

extern char** environ;

// Small integers times (rank + 1): their mean over W ranks, (W + 1) / 2 times the integer, is
// exact in bf16 for the world sizes tested here.
static float value(size_t i, int rank) { return (float)(i % 13) * (float)(rank + 1); }
static float mean_value(size_t i, int world) { return (float)(i % 13) * (world + 1) / 2.0f; }

static int report(int rank, const char* what, size_t i, float got, float expected) {
    fprintf(stderr, "rank %d: %s element %zu is %g, expected %g\n", rank, what, i, got, expected);
    return 1;
}

static void to_device(bf16* d, const std::vector<float>& h) {
    std::vector<bf16> b(h.size());
    for (size_t i = 0; i < h.size(); i++) b[i] = __float2bfloat16(h[i]);
    cudaCheck(cudaMemcpy(d, b.data(), b.size() * sizeof(bf16), cudaMemcpyHostToDevice));
}

static std::vector<float> from_device(const bf16* d, size_t n) {
    std::vector<bf16> b(n);
    cudaCheck(cudaMemcpy(b.data(), d, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = __bfloat162float(b[i]);
    return h;
}

// Every collective once on this rank; the number of wrong results (each said on stderr).
static int check_collectives(NcclComm* comm, int rank, int world) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    char err[ERR_LEN];
    ZeroShard s;
    if (zero_shard_init(&s, 1000, world, rank, ZERO_SHARD_ALIGN, err) != 0) die("%s", err);
    size_t n = s.padded_count, S = s.shard_size, first = (size_t)rank * S;
    bf16* buf;
    float* fbuf;
    cudaCheck(cudaMalloc(&buf, n * sizeof(bf16)));
    cudaCheck(cudaMalloc(&fbuf, n * sizeof(float)));
    int bad = 0;

    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = value(i, rank);
    to_device(buf, h);
    nccl_all_reduce_avg_bf16(comm, buf, n, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    h = from_device(buf, n);
    for (size_t i = 0; i < n && !bad; i++)
        if (h[i] != mean_value(i, world)) bad += report(rank, "all-reduce avg bf16", i, h[i], mean_value(i, world));

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

    // A checkpoint's fp32 state, gathered out of place.
    float* fshard;
    cudaCheck(cudaMalloc(&fshard, S * sizeof(float)));
    for (size_t j = 0; j < S; j++) mine[j] = (float)(first + j);
    cudaCheck(cudaMemcpy(fshard, mine.data(), S * sizeof(float), cudaMemcpyHostToDevice));
    nccl_all_gather_f32(comm, fshard, fbuf, S, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    h.resize(n);
    cudaCheck(cudaMemcpy(h.data(), fbuf, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != (float)i) { bad += report(rank, "all-gather f32", i, h[i], (float)i); break; }

    // The losses (averaged).
    float got[2] = {(float)(rank + 1), 0.5f}, expected[2] = {(world + 1) / 2.0f, 0.5f};
    cudaCheck(cudaMemcpy(fbuf, got, sizeof(got), cudaMemcpyHostToDevice));
    nccl_all_reduce_avg_f32(comm, fbuf, 2, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    cudaCheck(cudaMemcpy(got, fbuf, sizeof(got), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 2; i++)
        if (got[i] != expected[i]) bad += report(rank, "all-reduce avg f32", i, got[i], expected[i]);

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
