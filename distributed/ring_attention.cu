// distributed/ring_attention.cu: the ring attention of context parallelism
// (distributed/ring_attention.h), on the flash kernels of attention/flash.h.
// Per batch element, each rank i held here works in the workspace:
//   kv[2]   (2c, 2C) bf16   the keys and values travelling the ring (this step's, the next)
//   acc     (2c, C) fp32    forward: the merged output; backward: dQ
//   dkv[2]  (2c, 2C) fp32   backward: the gradients of the travelling keys and values
// and, shared: the pair (c, 3C) of one block (a local chunk's Q beside a travelling chunk's
// K and V, the fused layout the kernels read), the block's output, log-sum-exp and dqkv, and
// the flash backward's scratch. The ring's moves run on a stream of their own: the keys and
// values of step k+1 travel while step k's blocks compute (the gradients of the backward go
// after the blocks that add to them).
#include "distributed/ring_attention.h"

#include <math.h>
#include "attention/flash.h"

#define ALIGN_UP(x) (((x) + 255) / 256 * 256)

// What the workspace holds, laid out for the local shape s.
typedef struct {
    bf16* kv[2];       // [count], each (2c, 2C)
    float* acc;        // [count], each (2c, C)
    float* dkv[2];     // [count], each (2c, 2C)
    bf16* pair;        // (c, 3C)
    bf16* blk_out;     // (2c, C)
    float* blk_lse;    // (NH, 2c)
    bf16* blk_dqkv;    // (2c, 3C)
    void* flash_scratch;
    size_t kv_stride, acc_stride, dkv_stride;   // bytes between two ranks' buffers
} RingWorkspace;

// Rank i's buffers (i among the ranks held here); buf picks this step's or the next.
static bf16* kv_of(const RingWorkspace* w, int buf, int i) { return (bf16*)((char*)w->kv[buf] + i * w->kv_stride); }
static float* acc_of(const RingWorkspace* w, int i) { return (float*)((char*)w->acc + i * w->acc_stride); }
static float* dkv_of(const RingWorkspace* w, int buf, int i) { return (float*)((char*)w->dkv[buf] + i * w->dkv_stride); }

static AttentionShape one_sequence(AttentionShape s, int T, int causal) {
    AttentionShape x = {1, T, s.NH, s.HS, causal, s.scale};
    return x;
}

// Lays the workspace out at base (NULL: sizes only); returns its bytes.
static size_t layout_workspace(RingWorkspace* w, char* base, const RingGroup* g, AttentionShape s) {
    size_t n = s.T, c = n / 2, C = (size_t)s.NH * s.HS, off = 0;
    size_t kv = ALIGN_UP(n * 2 * C * sizeof(bf16)), acc = ALIGN_UP(n * C * sizeof(float));
    size_t dkv = ALIGN_UP(n * 2 * C * sizeof(float));
    w->kv_stride = kv;
    w->acc_stride = acc;
    w->dkv_stride = dkv;
    for (int k = 0; k < 2; k++) { w->kv[k] = (bf16*)(base + off); off += g->count * kv; }
    w->acc = (float*)(base + off); off += g->count * acc;
    for (int k = 0; k < 2; k++) { w->dkv[k] = (float*)(base + off); off += g->count * dkv; }
    w->pair = (bf16*)(base + off); off += ALIGN_UP(c * 3 * C * sizeof(bf16));
    w->blk_out = (bf16*)(base + off); off += ALIGN_UP(n * C * sizeof(bf16));
    w->blk_lse = (float*)(base + off); off += ALIGN_UP((size_t)s.NH * n * sizeof(float));
    w->blk_dqkv = (bf16*)(base + off); off += ALIGN_UP(n * 3 * C * sizeof(bf16));
    w->flash_scratch = base + off; off += ALIGN_UP(flash_attention_scratch_bytes(one_sequence(s, (int)n, 1)));
    return off;
}

const char* ring_attention_unsupported(const RingGroup* g, AttentionShape s) {
    if (s.T % 2 != 0) return "context parallel: the local sequence must be two equal chunks";
    if (s.B % g->count != 0) return "context parallel: the rows must hold every local rank of each sequence";
    if (!s.causal) return "context parallel: the ring computes causal attention";
    const char* why = flash_attention_unsupported(one_sequence(s, s.T, 1));
    return why;
}

size_t ring_attention_workspace_bytes(const RingGroup* g, AttentionShape s) {
    RingWorkspace w;
    return layout_workspace(&w, NULL, g, s);
}

// ----------------------------------------------------------------------------------------------
// Kernels: the merge, and moves between bf16 slots and fp32 accumulators

// One block per (row, head), a thread per dimension: the accumulator (o, l) of the row takes
// the block's (o_blk, l_blk): l = log(e^l + e^l_blk), o = e^(l_old - l) o + e^(l_blk - l) o_blk.
__global__ void merge_block_kernel(float* acc_o, float* acc_l, int acc_l_ld, const bf16* blk_o, const float* blk_l,
                                   int rows, int NH, int HS) {
    int row = blockIdx.x / NH, h = blockIdx.x % NH, d = threadIdx.x;
    float l_old = acc_l[(size_t)h * acc_l_ld + row], l_blk = blk_l[(size_t)h * rows + row];
    float l = fmaxf(l_old, l_blk) + log1pf(expf(-fabsf(l_old - l_blk)));
    size_t o = ((size_t)row * NH + h) * HS + d;
    acc_o[o] = expf(l_old - l) * acc_o[o] + expf(l_blk - l) * (float)blk_o[o];
    __syncthreads();   // every thread has read l_old
    if (d == 0) acc_l[(size_t)h * acc_l_ld + row] = l;
}

// dst (rows, cols; row stride dst_ld) += src (rows, cols; stride src_ld).
__global__ void accumulate_kernel(float* dst, int dst_ld, const bf16* src, int src_ld, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / cols, k = i % cols;
        dst[r * dst_ld + k] += (float)src[r * src_ld + k];
    }
}

// dst (rows, cols; stride dst_ld) = bf16(src (rows, cols; stride src_ld)).
__global__ void store_kernel(bf16* dst, int dst_ld, const float* src, int src_ld, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / cols, k = i % cols;
        dst[r * dst_ld + k] = (bf16)src[r * src_ld + k];
    }
}

static int grid_for(size_t n) { return (int)(ceil_div((long long)n, 256) < 4096 ? ceil_div((long long)n, 256) : 4096); }

static void accumulate(float* dst, int dst_ld, const bf16* src, int src_ld, int rows, int cols, cudaStream_t st) {
    accumulate_kernel<<<grid_for((size_t)rows * cols), 256, 0, st>>>(dst, dst_ld, src, src_ld, rows, cols);
    cudaCheckLaunch();
}

static void store(bf16* dst, int dst_ld, const float* src, int src_ld, int rows, int cols, cudaStream_t st) {
    store_kernel<<<grid_for((size_t)rows * cols), 256, 0, st>>>(dst, dst_ld, src, src_ld, rows, cols);
    cudaCheckLaunch();
}

// rows rows of width elements of `elem` bytes between two row strides (in elements).
static void copy_rows(void* dst, size_t dst_ld, const void* src, size_t src_ld, size_t width, size_t rows,
                      size_t elem, cudaStream_t st) {
    cudaCheck(cudaMemcpy2DAsync(dst, dst_ld * elem, src, src_ld * elem, width * elem, rows,
                                cudaMemcpyDeviceToDevice, st));
}

// ----------------------------------------------------------------------------------------------
// The ring

// The stream of the ring's moves and the events that order it against the blocks' stream,
// made on first use (one GPU per process).
static cudaStream_t move_stream;
static cudaEvent_t blocks_done, move_done;

// Every rank's buffer to the next rank of the ring: to[next] = from[this], bytes each; from and
// to are the workspace arrays of `stride` bytes per local rank. Starts after the work enqueued
// on st so far; ring_wait makes st wait for it.
static void ring_pass(const RingGroup* g, const void* from, void* to, size_t stride, size_t bytes, cudaStream_t st) {
    if (g->size == 1) return;
    if (!move_stream) {
        cudaCheck(cudaStreamCreateWithFlags(&move_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&blocks_done, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&move_done, cudaEventDisableTiming));
    }
    cudaCheck(cudaEventRecord(blocks_done, st));
    cudaCheck(cudaStreamWaitEvent(move_stream, blocks_done, 0));
    if (!g->comm) {   // simulated: every rank is here
        for (int i = 0; i < g->count; i++)
            cudaCheck(cudaMemcpyAsync((char*)to + ((i + 1) % g->count) * stride, (const char*)from + i * stride, bytes,
                                      cudaMemcpyDeviceToDevice, move_stream));
    } else {
        nccl_send_recv(g->comm, from, to, bytes, (g->first + 1) % g->size, (g->first + g->size - 1) % g->size,
                       move_stream);
    }
    cudaCheck(cudaEventRecord(move_done, move_stream));
}

// The blocks' stream waits for the moves issued so far.
static void ring_wait(const RingGroup* g, cudaStream_t st) {
    if (g->size > 1) cudaCheck(cudaStreamWaitEvent(st, move_done, 0));
}

// The blocks rank r computes at step k: (local chunk a, travelling chunk b) pairs. Step 0 is the
// whole local sequence, causal (returns 0 blocks; the caller does it).
static int ring_blocks(int r, int k, int N, int a[2], int b[2]) {
    if (k == 0) return 0;
    int s = (r - k + N) % N;   // whose keys arrived
    if (s < r) { a[0] = 0; b[0] = 0; a[1] = 1; b[1] = 0; }
    else       { a[0] = 1; b[0] = 0; a[1] = 1; b[1] = 1; }
    return 2;
}

// The pair of a block: Q of local chunk a (from qkv_local) beside K and V of travelling chunk b.
static void make_pair(bf16* pair, const bf16* qkv_local, const bf16* kv, int a, int b, int c, int C, cudaStream_t st) {
    copy_rows(pair, 3 * C, qkv_local + (size_t)a * c * 3 * C, 3 * C, C, c, sizeof(bf16), st);
    copy_rows(pair + C, 3 * C, kv + (size_t)b * c * 2 * C, 2 * C, 2 * C, c, sizeof(bf16), st);
}

// The local sequence's own keys and values of each rank held here, into its travelling buffer.
static void start_ring(const RingGroup* g, const RingWorkspace* w, const bf16* qkv, int batch, int n, int C,
                       cudaStream_t st) {
    for (int i = 0; i < g->count; i++) {
        const bf16* q_local = qkv + ((size_t)batch * g->count + i) * n * 3 * C;
        copy_rows(kv_of(w, 0, i), 2 * C, q_local + C, 3 * C, 2 * C, n, sizeof(bf16), st);
    }
}

void ring_attention_forward(const RingGroup* g, AttentionShape s, bf16* out, float* lse, const bf16* qkv,
                            void* workspace, cudaStream_t st) {
    const char* why = ring_attention_unsupported(g, s);
    if (why) die("%s", why);
    RingWorkspace w;
    layout_workspace(&w, (char*)workspace, g, s);
    int n = s.T, c = n / 2, C = s.NH * s.HS, N = g->size;
    size_t kv_bytes = (size_t)n * 2 * C * sizeof(bf16);
    for (int batch = 0; batch < s.B / g->count; batch++) {
        // The keys and values leave for the next rank while step 0 computes.
        start_ring(g, &w, qkv, batch, n, C, st);
        ring_pass(g, w.kv[0], w.kv[1], w.kv_stride, kv_bytes, st);
        for (int i = 0; i < g->count; i++) {
            size_t row = (size_t)batch * g->count + i;
            float* acc = acc_of(&w, i);
            // Step 0: the local sequence, causal; its output starts the accumulator.
            flash_attention_forward(one_sequence(s, n, 1), w.blk_out, lse + row * s.NH * n, qkv + row * n * 3 * C, st);
            cudaCheck(cudaMemsetAsync(acc, 0, (size_t)n * C * sizeof(float), st));
            accumulate(acc, C, w.blk_out, C, n, C, st);
        }
        int cur = 0;
        for (int k = 1; k < N; k++) {
            ring_wait(g, st);
            cur = 1 - cur;
            // The next step's keys travel while this step's blocks compute (after the blocks of
            // the step before, which read the buffer they arrive in).
            if (k + 1 < N) ring_pass(g, w.kv[cur], w.kv[1 - cur], w.kv_stride, kv_bytes, st);
            for (int i = 0; i < g->count; i++) {
                size_t row = (size_t)batch * g->count + i;
                const bf16* q_local = qkv + row * n * 3 * C;
                const bf16* kv = kv_of(&w, cur, i);
                float* acc = acc_of(&w, i);
                float* l = lse + row * s.NH * n;
                int a[2], b[2], blocks = ring_blocks(g->first + i, k, N, a, b);
                for (int j = 0; j < blocks; j++) {
                    make_pair(w.pair, q_local, kv, a[j], b[j], c, C, st);
                    flash_attention_forward(one_sequence(s, c, 0), w.blk_out, w.blk_lse, w.pair, st);
                    merge_block_kernel<<<c * s.NH, s.HS, 0, st>>>(acc + (size_t)a[j] * c * C, l + (size_t)a[j] * c, n,
                                                                 w.blk_out, w.blk_lse, c, s.NH, s.HS);
                    cudaCheckLaunch();
                }
            }
        }
        for (int i = 0; i < g->count; i++) {
            size_t row = (size_t)batch * g->count + i;
            store(out + row * n * C, C, acc_of(&w, i), C, n, C, st);
        }
    }
}

void ring_attention_backward(const RingGroup* g, AttentionShape s, bf16* dqkv, const bf16* dout, const bf16* out,
                             const float* lse, const bf16* qkv, void* workspace, int deterministic,
                             cudaStream_t st) {
    const char* why = ring_attention_unsupported(g, s);
    if (why) die("%s", why);
    RingWorkspace w;
    layout_workspace(&w, (char*)workspace, g, s);
    int n = s.T, c = n / 2, C = s.NH * s.HS, N = g->size;
    size_t kv_bytes = (size_t)n * 2 * C * sizeof(bf16), dkv_bytes = (size_t)n * 2 * C * sizeof(float);
    for (int batch = 0; batch < s.B / g->count; batch++) {
        start_ring(g, &w, qkv, batch, n, C, st);
        ring_pass(g, w.kv[0], w.kv[1], w.kv_stride, kv_bytes, st);
        for (int i = 0; i < g->count; i++) {
            size_t row = (size_t)batch * g->count + i;
            float* dq = acc_of(&w, i);
            float* dkv = dkv_of(&w, 0, i);
            // Step 0: the local sequence, causal, with the final O and L.
            flash_attention_backward(one_sequence(s, n, 1), w.blk_dqkv, dout + row * n * C, out + row * n * C,
                                     lse + row * s.NH * n, qkv + row * n * 3 * C, w.flash_scratch, deterministic, st);
            cudaCheck(cudaMemsetAsync(dq, 0, (size_t)n * C * sizeof(float), st));
            cudaCheck(cudaMemsetAsync(dkv, 0, (size_t)n * 2 * C * sizeof(float), st));
            accumulate(dq, C, w.blk_dqkv, 3 * C, n, C, st);
            accumulate(dkv, 2 * C, w.blk_dqkv + C, 3 * C, n, 2 * C, st);
        }
        int cur = 0;
        for (int k = 1; k < N; k++) {
            // The gradients go on with what the last step added to them; the keys went ahead.
            ring_pass(g, w.dkv[cur], w.dkv[1 - cur], w.dkv_stride, dkv_bytes, st);
            ring_wait(g, st);
            cur = 1 - cur;
            if (k + 1 < N) ring_pass(g, w.kv[cur], w.kv[1 - cur], w.kv_stride, kv_bytes, st);
            for (int i = 0; i < g->count; i++) {
                size_t row = (size_t)batch * g->count + i;
                const bf16* q_local = qkv + row * n * 3 * C;
                const bf16* kv = kv_of(&w, cur, i);
                float* dq = acc_of(&w, i);
                float* dkv = dkv_of(&w, cur, i);
                int a[2], b[2], blocks = ring_blocks(g->first + i, k, N, a, b);
                for (int j = 0; j < blocks; j++) {
                    size_t q_rows = (size_t)a[j] * c;
                    make_pair(w.pair, q_local, kv, a[j], b[j], c, C, st);
                    // The chunk's final log-sum-exp, (NH, c) as the kernels read it.
                    copy_rows(w.blk_lse, c, lse + row * s.NH * n + q_rows, n, c, s.NH, sizeof(float), st);
                    flash_attention_backward(one_sequence(s, c, 0), w.blk_dqkv, dout + (row * n + q_rows) * C,
                                             out + (row * n + q_rows) * C, w.blk_lse, w.pair, w.flash_scratch,
                                             deterministic, st);
                    accumulate(dq + q_rows * C, C, w.blk_dqkv, 3 * C, c, C, st);
                    accumulate(dkv + (size_t)b[j] * c * 2 * C, 2 * C, w.blk_dqkv + C, 3 * C, c, 2 * C, st);
                }
            }
        }
        // One more move brings each rank's key and value gradients home.
        ring_pass(g, w.dkv[cur], w.dkv[1 - cur], w.dkv_stride, dkv_bytes, st);
        ring_wait(g, st);
        if (N > 1) cur = 1 - cur;
        for (int i = 0; i < g->count; i++) {
            size_t row = (size_t)batch * g->count + i;
            bf16* d = dqkv + row * n * 3 * C;
            store(d, 3 * C, acc_of(&w, i), C, n, C, st);
            store(d + C, 3 * C, dkv_of(&w, cur, i), 2 * C, n, 2 * C, st);
        }
    }
}
