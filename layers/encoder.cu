// layers/encoder.cu: the embedding layer, out (B, T, C) = wte[tokens] (Vp, C) + wpe[t] (maxT, C),
// or wte[tokens] alone (rotary positions: no wpe).
// Backward without atomics: the host groups the positions (B*T) by token id (encoder_token_groups,
// a counting sort, so each group lists its positions in increasing order; the value embeddings'
// backward takes the same groups), and one thread per (token, 8 channels) adds that token's rows
// of dout in this order; dwpe sums over B in order. Same bits on every run.
// Threads move 8 channels at a time: C % 8 == 0 and the buffers 16-byte aligned.
#include "layers/encoder.h"
#include "device/bf16.cuh"

static void check_shape(const char* who, int C, const void* a, const void* b, const void* c) {
    if (C % 8 != 0 || !aligned16(a) || !aligned16(b) || !aligned16(c))
        die("%s: needs C (%d) a multiple of 8 and 16-byte aligned buffers", who, C);
}

// One thread per 8 channels (a pack) of one position; packs_per_row = C / 8. Row bt is at
// position positions[bt], or bt % T without them; no wpe: wte's row alone.
__global__ void encoder_forward_kernel(bf16x8* out, const int* tokens, const int* positions, const bf16x8* wte,
                                       const bf16x8* wpe, int T, int packs_per_row, size_t packs) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= packs) return;
    size_t bt = idx / packs_per_row;
    int p = (int)(idx % packs_per_row);
    bf16x8 o = wte[(size_t)tokens[bt] * packs_per_row + p];
    if (wpe) {
        int t = positions ? positions[bt] : (int)(bt % T);
        bf16x8 b = wpe[(size_t)t * packs_per_row + p];
        for (int k = 0; k < 8; k++) o.v[k] = (bf16)((float)o.v[k] + (float)b.v[k]);
    }
    out[idx] = o;
}

static void launch_forward(bf16* out, const int* tokens, const int* positions, const bf16* wte, const bf16* wpe,
                           size_t rows, int T, int C, cudaStream_t stream) {
    check_shape("encoder_forward", C, out, wte, wpe);
    size_t packs = rows * C / 8;
    if (packs == 0) return;
    const int block = 256;
    encoder_forward_kernel<<<ceil_div(packs, block), block, 0, stream>>>(
        (bf16x8*)out, tokens, positions, (const bf16x8*)wte, (const bf16x8*)wpe, T, C / 8, packs);
    cudaCheckLaunch();
}

void encoder_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe,
                     int B, int T, int C, cudaStream_t stream) {
    launch_forward(out, tokens, NULL, wte, wpe, (size_t)B * T, T, C, stream);
}

void encoder_forward_at(bf16* out, const int* tokens, const int* positions, const bf16* wte, const bf16* wpe,
                        int N, int C, cudaStream_t stream) {
    launch_forward(out, tokens, positions, wte, wpe, (size_t)N, 1, C, stream);
}

// Block (g, chunk), one thread per pack of 8 channels: group g's token, packs
// [chunk * blockDim.x, ...). positions (B*T) hold the groups one after the other; group g is
// positions[group_start[g] .. group_start[g + 1]).
__global__ void encoder_backward_wte_kernel(bf16x8* dwte, const bf16x8* dout, const int* positions,
                                            const int* group_start, const int* group_token,
                                            int packs_per_row) {
    int p = blockIdx.y * blockDim.x + threadIdx.x;
    if (p >= packs_per_row) return;
    int g = blockIdx.x;
    float acc[8] = {0.0f};
    #pragma unroll 4
    for (int i = group_start[g]; i < group_start[g + 1]; i++) {
        bf16x8 d = dout[(size_t)positions[i] * packs_per_row + p];
        for (int k = 0; k < 8; k++) acc[k] += (float)d.v[k];
    }
    bf16x8* out = dwte + (size_t)group_token[g] * packs_per_row + p;
    bf16x8 o = *out;
    for (int k = 0; k < 8; k++) o.v[k] = (bf16)((float)o.v[k] + acc[k]);
    *out = o;
}

// One thread per (t, pack): dwpe[t] += sum over b in order of dout[b, t].
__global__ void encoder_backward_wpe_kernel(bf16x8* dwpe, const bf16x8* dout, int B, int T,
                                            int packs_per_row) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * packs_per_row) return;
    float acc[8] = {0.0f};
    for (int b = 0; b < B; b++) {
        bf16x8 d = dout[(size_t)b * T * packs_per_row + idx];
        for (int k = 0; k < 8; k++) acc[k] += (float)d.v[k];
    }
    bf16x8 o = dwpe[idx];
    for (int k = 0; k < 8; k++) o.v[k] = (bf16)((float)o.v[k] + acc[k]);
    dwpe[idx] = o;
}

size_t encoder_token_groups_bytes(int N) {
    return (3 * (size_t)N + 1) * sizeof(int);  // positions, group starts, group tokens
}

// Two pinned staging buffers for the groups, taken in turn, each reused once the upload from it
// is done: a call waits for the upload of the call before the last, not for the last one's, which
// may still wait in the stream behind work queued since: a backward that makes one call a
// micro-step waits for the upload of two micro-steps back, which the GPU has long done.
static int* staging_buffers[2];
static size_t staging_counts[2];
static cudaEvent_t staging_free[2];
static int staging_next;

int encoder_token_groups(int* groups_dev, const int* host_tokens, int N, cudaStream_t stream) {
    size_t count = 3 * (size_t)N + 1;
    int k = staging_next;
    staging_next = 1 - k;
    if (!staging_free[k]) cudaCheck(cudaEventCreateWithFlags(&staging_free[k], cudaEventDisableTiming));
    cudaCheck(cudaEventSynchronize(staging_free[k]));
    if (staging_counts[k] < count) {
        if (staging_buffers[k]) cudaCheck(cudaFreeHost(staging_buffers[k]));
        cudaCheck(cudaMallocHost((void**)&staging_buffers[k], count * sizeof(int)));
        staging_counts[k] = count;
    }
    int* staging = staging_buffers[k];

    // Counting sort of the positions by token: positions, then group_start (groups + 1), then
    // group_token (groups), packed so that one copy uploads them.
    int max_token = 0;
    for (int i = 0; i < N; i++) {
        if (host_tokens[i] < 0)
            die("encoder_token_groups: negative token id %d at position %d", host_tokens[i], i);
        if (host_tokens[i] > max_token) max_token = host_tokens[i];
    }
    int* next = (int*)calloc((size_t)max_token + 2, sizeof(int));  // per token: first free slot
    if (!next) die("encoder_token_groups: out of host memory");
    for (int i = 0; i < N; i++) next[host_tokens[i] + 1]++;
    int* positions = staging;
    int* group_start = staging + N;
    int groups = 0;
    for (int tok = 0; tok <= max_token; tok++) {
        if (next[tok + 1] > 0) group_start[groups++] = next[tok];
        next[tok + 1] += next[tok];
    }
    group_start[groups] = N;
    int* group_token = group_start + groups + 1;
    groups = 0;
    for (int tok = 0; tok <= max_token; tok++)
        if (next[tok + 1] > next[tok]) group_token[groups++] = tok;
    for (int i = 0; i < N; i++) positions[next[host_tokens[i]]++] = i;
    free(next);

    cudaCheck(cudaMemcpyAsync(groups_dev, staging, (N + 2 * (size_t)groups + 1) * sizeof(int),
                              cudaMemcpyHostToDevice, stream));
    cudaCheck(cudaEventRecord(staging_free[k], stream));
    return groups;
}

void encoder_backward(bf16* dwte, bf16* dwpe, const bf16* dout, const int* groups, int group_count,
                      int B, int T, int C, cudaStream_t stream) {
    check_shape("encoder_backward", C, dwte, dwpe, dout);
    int N = B * T;
    if (N == 0 || C == 0) return;
    const int block = 128;
    dim3 grid(group_count, ceil_div(C / 8, block));
    encoder_backward_wte_kernel<<<grid, block, 0, stream>>>((bf16x8*)dwte, (const bf16x8*)dout, groups,
                                                            groups + N, groups + N + group_count + 1, C / 8);
    cudaCheckLaunch();
    if (!dwpe) return;
    encoder_backward_wpe_kernel<<<ceil_div((size_t)T * C / 8, block), block, 0, stream>>>(
        (bf16x8*)dwpe, (const bf16x8*)dout, B, T, C / 8);
    cudaCheckLaunch();
}
