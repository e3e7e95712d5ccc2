// tests/unit/train/test_batches.cu: the trainer's double-buffered batches (train/batches.h) give the
// loader's batches in the loader's order, the two pinned buffers taken in turn, whole sequences
// and a context-parallel group of 2 simulated (each sequence's zigzag chunks); and a buffer is not
// refilled while a copy from it is queued: the copies wait behind a kernel that spins, and what
// reaches the GPU must still be the batch that was in the buffer when the copy was queued.
// SKIPPED without a CUDA device.
#include <string.h>
#include <vector>

#include "common/output_path.h"
#include "data/shard.h"
#include "train/batches.h"
#include "tests/lib/test.h"

#define B 2
#define T 16
#define BATCHES 7
#define VOCAB 1000

// Holds the stream busy for about cycles clock cycles.
__global__ void spin_kernel(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

// A shard of 3 epochs' worth of batches at dir/train_000.bin; returns its glob.
static void write_tokens(const char* dir, char* pattern, size_t len) {
    char err[ERR_LEN], path[4200];
    if (make_dirs(dir, err) != 0) die("%s", err);
    snprintf(path, sizeof(path), "%s/train_000.bin", dir);
    std::vector<int> tokens(3 * B * T + 1);
    for (size_t i = 0; i < tokens.size(); i++) tokens[i] = (int)((i * 37 + 11) % VOCAB);
    if (shard_write(path, tokens.data(), tokens.size(), VOCAB, err) != 0) die("%s", err);
    snprintf(pattern, len, "%s/train_*.bin", dir);
}

static DataLoader* open_loader(const char* pattern) {
    char err[ERR_LEN];
    DataLoader* dl = dataloader_open(pattern, B, T, 0, 1, 1, 5, VOCAB, err);
    if (!dl) die("%s", err);
    return dl;
}

// BATCHES batches through the buffers of a group of group_size simulated ranks, each copied to
// the GPU behind a spinning kernel, against the loader's own (split as the rows are).
static void check_batches(const char* name, const char* pattern, int group_size) {
    test_begin(name);
    Ranks ranks;
    memset(&ranks, 0, sizeof(ranks));
    ranks.ring = ring_transport_in_memory(group_size);
    BatchRows rows;
    batch_rows_init(&rows, &ranks, B, T);
    batch_rows_pin(&rows);
    DataLoader* through = open_loader(pattern);
    DataLoader* direct = open_loader(pattern);
    size_t n = (size_t)rows.rows * rows.cols;
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    int* device;
    cudaCheck(cudaMalloc((void**)&device, 2 * BATCHES * n * sizeof(int)));
    std::vector<int> expected(2 * BATCHES * n), full_tokens(B * T), full_targets(B * T);
    char err[ERR_LEN];
    for (int k = 0; k < BATCHES; k++) {
        // The first copies wait behind 20 ms or so of spinning: the buffers are refilled meanwhile
        // unless next_batch waits for them.
        if (k == 0) spin_kernel<<<1, 1, 0, stream>>>(40000000LL);
        int i = next_batch(&rows, through, "--train-data");
        CHECK(i == k % 2, "batch %d went to buffer %d", k, i);
        cudaCheck(cudaMemcpyAsync(device + 2 * k * n, rows.tokens[i], n * sizeof(int), cudaMemcpyHostToDevice, stream));
        cudaCheck(cudaMemcpyAsync(device + (2 * k + 1) * n, rows.targets[i], n * sizeof(int), cudaMemcpyHostToDevice,
                                  stream));
        batch_copied(&rows, i, stream);
        if (dataloader_next(direct, full_tokens.data(), full_targets.data(), err) != 0) die("%s", err);
        int* tokens = expected.data() + 2 * k * n;
        int* targets = tokens + n;
        if (group_size == 1) {
            memcpy(tokens, full_tokens.data(), n * sizeof(int));
            memcpy(targets, full_targets.data(), n * sizeof(int));
        } else {
            zigzag_split(&rows.ring, full_tokens.data(), B, T, tokens);
            zigzag_split(&rows.ring, full_targets.data(), B, T, targets);
        }
    }
    std::vector<int> got(2 * BATCHES * n);
    cudaCheck(cudaMemcpyAsync(got.data(), device, got.size() * sizeof(int), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    for (int k = 0; k < BATCHES; k++)
        CHECK(memcmp(got.data() + 2 * k * n, expected.data() + 2 * k * n, 2 * n * sizeof(int)) == 0,
              "batch %d on the GPU is not the loader's batch %d", k, k);
    cudaCheck(cudaFree(device));
    cudaCheck(cudaStreamDestroy(stream));
    dataloader_close(through);
    dataloader_close(direct);
    batch_rows_free(&rows);
    test_end();
}

int main(void) {
    const char* names[2] = {"batches double-buffered: the loader's batches in order, no buffer refilled under a copy",
                            "batches double-buffered, context parallel 2 simulated: the loader's batches' chunks in "
                            "order, no buffer refilled under a copy"};
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (const char* name : names) test_skip(name, "no CUDA device");
        return test_exit_code();
    }
    char dir[4096], pattern[4200];
    snprintf(dir, sizeof(dir), "%s/test_batches", test_env("FLASHGPT_TMP", "/tmp"));
    write_tokens(dir, pattern, sizeof(pattern));
    check_batches(names[0], pattern, 1);
    check_batches(names[1], pattern, 2);
    return test_exit_code();
}
