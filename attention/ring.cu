// attention/ring.cu: the ring attention of context parallelism (attention/ring.h), on the flash
// kernels of attention/flash.h. The forward and the backward take the blocks of each step as the
// walk gives them (ring_step_blocks, attention/ring_walk.h). Every block is one flash call on
// views (attention/params.h):
// the queries of a local chunk where they lie in the fused qkv, the keys and values of a
// travelling chunk where they lie in the ring's buffer; nothing is copied to make a block.
// Per batch element, each rank i held here works in the workspace:
//   kv[2]   (2c, 2C) bf16   the keys and values travelling the ring (this step's, the next)
//   acc     (2c, C) fp32    forward: the merged output; backward: dQ
//   dkv[2]  (2c, 2C) fp32   backward: the gradients of the travelling keys and values
// and, shared: one block's output (c, C) or its dQ, dK, dV (c, 3C), its log-sum-exp (NH, c),
// and the flash backward's scratch. Step 0's blocks on the diagonal (or the whole local sequence
// without a mask) write straight into the caller's out and lse (dqkv in the backward), and their
// rows start the accumulators.
// ring_document_bounds takes the same workspace: a whole sequence for each rank held here and
// the tokens travelling the ring.
// The ring's moves run on a stream of their own: the keys and values of step k+1 travel while
// step k's blocks compute (the gradients of the backward go after the blocks that add to them).
#include "attention/ring.h"

#include <string.h>
#include "attention/flash.h"
#include "attention/mask.h"
#include "attention/ring_walk.h"
#include "attention/softmax.cuh"
#include "common/bytes.h"

// What the workspace holds, laid out for the local shape s.
typedef struct {
    bf16* kv[2];       // [count], each (2c, 2C)
    float* acc;        // [count], each (2c, C)
    float* dkv[2];     // [count], each (2c, 2C)
    bf16* blk;         // (c, C) a block's output, or (c, 3C) its dQ, dK, dV
    float* blk_lse;    // (NH, c)
    void* flash_scratch;
    size_t kv_stride, acc_stride, dkv_stride;   // bytes between two ranks' buffers
} RingWorkspace;

// Rank i's buffers (i among the ranks held here); buf picks this step's or the next.
static bf16* kv_of(const RingWorkspace* w, int buf, int i) { return (bf16*)((char*)w->kv[buf] + i * w->kv_stride); }
static float* acc_of(const RingWorkspace* w, int i) { return (float*)((char*)w->acc + i * w->acc_stride); }
static float* dkv_of(const RingWorkspace* w, int buf, int i) {
    return (float*)((char*)w->dkv[buf] + i * w->dkv_stride);
}

static AttentionShape one_sequence(AttentionShape s, int T, int causal) {
    AttentionShape x = {1, T, s.NH, s.HS, causal, s.scale};
    return x;
}

// Lays the workspace out at base (NULL: sizes only); returns its bytes.
static size_t layout_workspace(RingWorkspace* w, char* base, const AttentionRing* g, AttentionShape s) {
    size_t n = s.T, c = n / 2, C = (size_t)s.NH * s.HS, off = 0;
    w->kv_stride = carve_round_up(n * 2 * C * sizeof(bf16));
    w->acc_stride = carve_round_up(n * C * sizeof(float));
    w->dkv_stride = carve_round_up(n * 2 * C * sizeof(float));
    for (int k = 0; k < 2; k++) { w->kv[k] = (bf16*)(base + off); off += g->count * w->kv_stride; }
    w->acc = (float*)(base + off); off += g->count * w->acc_stride;
    for (int k = 0; k < 2; k++) { w->dkv[k] = (float*)(base + off); off += g->count * w->dkv_stride; }
    w->blk = (bf16*)(base + off); off += carve_round_up(c * 3 * C * sizeof(bf16));
    w->blk_lse = (float*)(base + off); off += carve_round_up((size_t)s.NH * c * sizeof(float));
    w->flash_scratch = base + off; off += carve_round_up(flash_attention_scratch_bytes(one_sequence(s, (int)n, 1)));
    return off;
}

// ring_document_bounds' workspace, laid out at base (NULL: sizes only) for rows of n tokens:
// each held rank's whole sequence (N n), and the tokens travelling the ring (n, this step's
// and the next). Returns its bytes.
static size_t layout_gather(int** sequence, int* travel[2], size_t* travel_stride, char* base, const AttentionRing* g,
                            int n) {
    size_t seq_bytes = carve_round_up((size_t)g->count * g->size * n * sizeof(int)), off = 0;
    *travel_stride = carve_round_up((size_t)n * sizeof(int));
    *sequence = (int*)base;
    off += seq_bytes;
    for (int k = 0; k < 2; k++) { travel[k] = (int*)(base + off); off += g->count * *travel_stride; }
    return off;
}

void zigzag_split(const AttentionRing* g, const int* batch, int B, int T, int* rows) {
    size_t c = (size_t)T / (2 * g->size);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < g->count; i++)
            for (int half = 0; half < 2; half++)
                memcpy(rows + ((size_t)b * g->count + i) * 2 * c + half * c,
                       batch + (size_t)b * T + zigzag_chunk(g->first + i, half, g->size) * c, c * sizeof(int));
}

const char* ring_attention_unsupported(const AttentionRing* g, AttentionShape s) {
    if (s.T % 2 != 0) return "context parallel: the local sequence must be two equal chunks";
    if (s.B % g->count != 0) return "context parallel: the rows must hold every local rank of each sequence";
    if (!s.causal) return "context parallel: the ring computes causal attention";
    return flash_attention_unsupported(one_sequence(s, s.T, 1));
}

size_t ring_attention_workspace_bytes(const AttentionRing* g, AttentionShape s) {
    RingWorkspace w;
    int *sequence, *travel[2];
    size_t travel_stride, blocks = layout_workspace(&w, NULL, g, s);
    size_t gather = layout_gather(&sequence, travel, &travel_stride, NULL, g, s.T);
    return blocks > gather ? blocks : gather;
}

// ----------------------------------------------------------------------------------------------
// Kernels: the merge, and moves between bf16 blocks and fp32 accumulators

// One block per (row, head), a thread per dimension: the accumulator (o, l) of the row takes
// the block's (o_blk, l_blk), both softmaxes normalised (attention/softmax.cuh's merge).
__global__ void merge_block_kernel(float* acc_o, float* acc_l, int acc_l_ld, const bf16* blk_o, const float* blk_l,
                                   int rows, int NH, int HS) {
    int row = blockIdx.x / NH, h = blockIdx.x % NH, d = threadIdx.x;
    float l_old = acc_l[(size_t)h * acc_l_ld + row], l_blk = blk_l[(size_t)h * rows + row];
    float l = lse_merge(l_old, l_blk);
    size_t o = ((size_t)row * NH + h) * HS + d;
    acc_o[o] = expf(l_old - l) * acc_o[o] + expf(l_blk - l) * (float)blk_o[o];
    __syncthreads();   // every thread has read l_old
    if (d == 0) acc_l[(size_t)h * acc_l_ld + row] = l;
}

enum { OVERWRITE = 0, ADD = 1 };

// dst (rows, cols; row stride dst_ld) = src (rows, cols; stride src_ld), or += with ADD.
template <class Dst, class Src>
__global__ void convert_kernel(Dst* dst, int dst_ld, const Src* src, int src_ld, int rows, int cols, int add) {
    size_t n = (size_t)rows * cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / cols, k = i % cols;
        float x = (float)src[r * src_ld + k];
        dst[r * dst_ld + k] = (Dst)(add ? (float)dst[r * dst_ld + k] + x : x);
    }
}

template <class Dst, class Src>
static void convert(Dst* dst, int dst_ld, const Src* src, int src_ld, int rows, int cols, int add, cudaStream_t st) {
    long long blocks = ceil_div((long long)rows * cols, 256);
    convert_kernel<<<(int)(blocks < 4096 ? blocks : 4096), 256, 0, st>>>(dst, dst_ld, src, src_ld, rows, cols, add);
    cudaCheckLaunch();
}

// ----------------------------------------------------------------------------------------------
// The ring

// The stream of the ring's moves and the events that order it against the blocks' stream,
// made on first use (one GPU per process).
static cudaStream_t move_stream;
static cudaEvent_t blocks_done, move_done;

// Every rank's buffer to the next rank of the ring through the transport, once the work
// enqueued on st so far is done; ring_wait makes st wait for it. A ring of one moves nothing.
static void ring_pass(const AttentionRing* g, const void* from, void* to, size_t stride, size_t bytes,
                      cudaStream_t st) {
    if (g->size == 1) return;
    if (!move_stream) {
        cudaCheck(cudaStreamCreateWithFlags(&move_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&blocks_done, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&move_done, cudaEventDisableTiming));
    }
    cudaCheck(cudaEventRecord(blocks_done, st));
    cudaCheck(cudaStreamWaitEvent(move_stream, blocks_done, 0));
    g->pass(g->transport, from, to, stride, bytes, move_stream);
    cudaCheck(cudaEventRecord(move_done, move_stream));
}

// The blocks' stream waits for the moves issued so far.
static void ring_wait(const AttentionRing* g, cudaStream_t st) {
    if (g->size > 1) cudaCheck(cudaStreamWaitEvent(st, move_done, 0));
}

// One sequence's rows of HS-wide heads from ptr, row_stride elements apart. The batch stride is
// never stepped (B is 1); it is nonzero because a tensor map's strides must be.
static AttentionTensor rows_at(const bf16* ptr, long long row_stride, int HS) {
    AttentionTensor t = {(bf16*)ptr, 2 * row_stride, row_stride, HS};
    return t;
}

// The block of local chunk a's queries (in the row's fused qkv) against travelling chunk b's
// keys and values (in kv, the values C after the keys): causal on the diagonal (a masked block
// of a chunk against itself), else all of it visible but for a mask.
static AttentionParams block_params(AttentionShape s, const bf16* qkv_row, const bf16* kv, int a, int b, int causal) {
    long long c = s.T / 2, C = (long long)s.NH * s.HS;
    AttentionParams p = {one_sequence(s, (int)c, causal)};
    p.q = rows_at(qkv_row + a * c * 3 * C, 3 * C, s.HS);
    p.k = rows_at(kv + b * c * 2 * C, 2 * C, s.HS);
    p.v = rows_at(kv + b * c * 2 * C + C, 2 * C, s.HS);
    return p;
}

// The final O, dO and L of local chunk a of row `row` (the backward's), in place.
static void chunk_outputs(AttentionParams* p, AttentionShape s, const bf16* out, const bf16* dout, const float* lse,
                          size_t row, int a) {
    int n = s.T, c = n / 2, C = s.NH * s.HS;
    size_t q_row = row * n + (size_t)a * c;   // the chunk's first row in out and dout
    p->o = rows_at(out + q_row * C, C, s.HS);
    p->dout = rows_at(dout + q_row * C, C, s.HS);
    p->lse = (AttentionLse){(float*)lse + row * s.NH * n + (size_t)a * c, 0, n};   // its rows of each head's n
}

// The mask of a block of row `row`: the plan's, on the arrays of the row's sequence (N * 2c
// positions) at the positions of global chunks q_chunk (queries) and k_chunk (keys); NULL
// without a mask.
static const AttentionMask* block_mask(AttentionMask* m, const AttentionMask* plan, size_t row, int N, int c,
                                       int q_chunk, int k_chunk) {
    if (!attention_mask_active(plan)) return NULL;
    *m = *plan;
    size_t at = row * 2 * N * c;
    if (m->doc_start) m->doc_start += at, m->doc_end += at;
    m->query0 = q_chunk * c;
    m->key0 = k_chunk * c;
    return m;
}

// The local sequence's own keys and values of each rank held here, into its travelling buffer.
static void start_ring(const AttentionRing* g, const RingWorkspace* w, const bf16* qkv, int batch, int n, int C,
                       cudaStream_t st) {
    for (int i = 0; i < g->count; i++) {
        const bf16* qkv_row = qkv + ((size_t)batch * g->count + i) * n * 3 * C;
        cudaCheck(cudaMemcpy2DAsync(kv_of(w, 0, i), 2 * C * sizeof(bf16), qkv_row + C, 3 * C * sizeof(bf16),
                                    2 * C * sizeof(bf16), n, cudaMemcpyDeviceToDevice, st));
    }
}

// Block x of the walk for local row `row` (acc: the row's accumulator), against the keys and
// values at kv (the rank's own at step 0, then the travelling ones). The whole local
// sequence, or a block on the diagonal, into out and lse, whose rows then start the accumulator;
// any other block into the block buffers, merged into the accumulator and the row's lse.
static void forward_block(const RingBlock* x, AttentionShape s, const RingWorkspace* w, const AttentionMask* mask,
                          int N, size_t row, const bf16* qkv, const bf16* kv, bf16* out, float* lse, float* acc,
                          cudaStream_t st) {
    int n = s.T, c = n / 2, C = s.NH * s.HS;
    const bf16* qkv_row = qkv + row * n * 3 * C;
    float* l = lse + row * s.NH * n;
    if (x->kind == RING_LOCAL) {
        AttentionParams p = attention_fused_params(one_sequence(s, n, 1), qkv_row, out + row * n * C, l, NULL, NULL);
        flash_attention_forward(&p, NULL, st);
        convert(acc, C, out + row * n * C, C, n, C, OVERWRITE, st);
        return;
    }
    AttentionMask m;
    const AttentionMask* bm = block_mask(&m, mask, row, N, c, x->q_chunk, x->k_chunk);
    AttentionParams p = block_params(s, qkv_row, kv, x->a, x->b, x->kind == RING_DIAGONAL);
    if (x->kind == RING_DIAGONAL) {
        bf16* o = out + (row * n + (size_t)x->a * c) * C;
        p.o = rows_at(o, C, s.HS);
        p.lse = (AttentionLse){l + (size_t)x->a * c, 0, n};
        flash_attention_forward(&p, bm, st);
        convert(acc + (size_t)x->a * c * C, C, o, C, c, C, OVERWRITE, st);
        return;
    }
    p.o = rows_at(w->blk, C, s.HS);
    p.lse = (AttentionLse){w->blk_lse, 0, c};
    flash_attention_forward(&p, bm, st);
    merge_block_kernel<<<c * s.NH, s.HS, 0, st>>>(acc + (size_t)x->a * c * C, l + (size_t)x->a * c, n, w->blk,
                                                 w->blk_lse, c, s.NH, s.HS);
    cudaCheckLaunch();
}

void ring_attention_forward(const AttentionRing* g, AttentionShape s, const AttentionMask* mask, bf16* out,
                            float* lse, const bf16* qkv, void* workspace, cudaStream_t st) {
    RingWorkspace w;
    layout_workspace(&w, (char*)workspace, g, s);
    int n = s.T, c = n / 2, C = s.NH * s.HS, N = g->size, masked = attention_mask_active(mask);
    int window = masked ? mask->window : 0;
    size_t kv_bytes = (size_t)n * 2 * C * sizeof(bf16);
    for (int batch = 0; batch < s.B / g->count; batch++) {
        start_ring(g, &w, qkv, batch, n, C, st);
        int cur = 0;
        for (int k = 0; k < N; k++) {
            if (k > 0) {
                ring_wait(g, st);
                cur = 1 - cur;
            }
            // The next step's keys travel while this step's blocks compute (after the blocks of
            // the step before, which read the buffer they arrive in).
            if (k + 1 < N) ring_pass(g, w.kv[cur], w.kv[1 - cur], w.kv_stride, kv_bytes, st);
            for (int i = 0; i < g->count; i++) {
                RingBlock blocks[3];
                int n_blocks = ring_step_blocks(g->first + i, k, N, masked, window, c, blocks);
                for (int j = 0; j < n_blocks; j++)
                    forward_block(&blocks[j], s, &w, mask, N, (size_t)batch * g->count + i, qkv, kv_of(&w, cur, i),
                                  out, lse, acc_of(&w, i), st);
            }
        }
        for (int i = 0; i < g->count; i++) {
            size_t row = (size_t)batch * g->count + i;
            convert(out + row * n * C, C, acc_of(&w, i), C, n, C, OVERWRITE, st);
        }
    }
}

// Block x of the walk for local row `row` with the final O and L (acc: the row's dQ accumulator;
// dkv: the gradients of the keys and values at kv). The whole local
// sequence, or a block on the diagonal, into dqkv, whose rows then start the accumulators; any
// other block into the block buffers, added to them.
static void backward_block(const RingBlock* x, AttentionShape s, const RingWorkspace* w, const AttentionMask* mask,
                           int N, size_t row, const bf16* qkv, const bf16* out, const bf16* dout, const float* lse,
                           const bf16* kv, bf16* dqkv, float* acc, float* dkv, int deterministic, cudaStream_t st) {
    int n = s.T, c = n / 2, C = s.NH * s.HS;
    bf16* d = dqkv + row * n * 3 * C;
    if (x->kind == RING_LOCAL) {
        AttentionParams p = attention_fused_params(one_sequence(s, n, 1), qkv + row * n * 3 * C,
                                                   (bf16*)out + row * n * C, (float*)lse + row * s.NH * n, d,
                                                   dout + row * n * C);
        flash_attention_backward(&p, NULL, w->flash_scratch, deterministic, st);
        convert(acc, C, d, 3 * C, n, C, OVERWRITE, st);
        convert(dkv, 2 * C, d + C, 3 * C, n, 2 * C, OVERWRITE, st);
        return;
    }
    AttentionMask m;
    AttentionParams p = block_params(s, qkv + row * n * 3 * C, kv, x->a, x->b, x->kind == RING_DIAGONAL);
    chunk_outputs(&p, s, out, dout, lse, row, x->a);
    int diagonal = x->kind == RING_DIAGONAL;
    bf16* grads = diagonal ? d + (size_t)x->a * c * 3 * C : w->blk;   // dQ, dK, dV of the block's rows
    p.dq = rows_at(grads, 3 * C, s.HS);
    p.dk = rows_at(grads + C, 3 * C, s.HS);
    p.dv = rows_at(grads + 2 * C, 3 * C, s.HS);
    flash_attention_backward(&p, block_mask(&m, mask, row, N, c, x->q_chunk, x->k_chunk), w->flash_scratch,
                             deterministic, st);
    convert(acc + (size_t)x->a * c * C, C, grads, 3 * C, c, C, diagonal ? OVERWRITE : ADD, st);
    convert(dkv + (size_t)x->b * c * 2 * C, 2 * C, grads + C, 3 * C, c, 2 * C, diagonal ? OVERWRITE : ADD, st);
}

void ring_attention_backward(const AttentionRing* g, AttentionShape s, const AttentionMask* mask, bf16* dqkv,
                             const bf16* dout, const bf16* out, const float* lse, const bf16* qkv, void* workspace,
                             int deterministic, cudaStream_t st) {
    RingWorkspace w;
    layout_workspace(&w, (char*)workspace, g, s);
    int n = s.T, c = n / 2, C = s.NH * s.HS, N = g->size, masked = attention_mask_active(mask);
    int window = masked ? mask->window : 0;
    size_t kv_bytes = (size_t)n * 2 * C * sizeof(bf16), dkv_bytes = (size_t)n * 2 * C * sizeof(float);
    for (int batch = 0; batch < s.B / g->count; batch++) {
        start_ring(g, &w, qkv, batch, n, C, st);
        int cur = 0;
        for (int k = 0; k < N; k++) {
            if (k > 0) {
                // The gradients go on with what the last step added to them; the keys went ahead.
                ring_pass(g, w.dkv[cur], w.dkv[1 - cur], w.dkv_stride, dkv_bytes, st);
                ring_wait(g, st);
                cur = 1 - cur;
            }
            if (k + 1 < N) ring_pass(g, w.kv[cur], w.kv[1 - cur], w.kv_stride, kv_bytes, st);
            for (int i = 0; i < g->count; i++) {
                RingBlock blocks[3];
                int n_blocks = ring_step_blocks(g->first + i, k, N, masked, window, c, blocks);
                for (int j = 0; j < n_blocks; j++)
                    backward_block(&blocks[j], s, &w, mask, N, (size_t)batch * g->count + i, qkv, out, dout, lse,
                                   kv_of(&w, cur, i), dqkv, acc_of(&w, i), dkv_of(&w, cur, i), deterministic, st);
            }
        }
        // One more move brings each rank's key and value gradients home.
        ring_pass(g, w.dkv[cur], w.dkv[1 - cur], w.dkv_stride, dkv_bytes, st);
        ring_wait(g, st);
        if (N > 1) cur = 1 - cur;
        for (int i = 0; i < g->count; i++) {
            bf16* d = dqkv + ((size_t)batch * g->count + i) * n * 3 * C;
            convert(d, 3 * C, acc_of(&w, i), C, n, C, OVERWRITE, st);
            convert(d + C, 3 * C, dkv_of(&w, cur, i), 2 * C, n, 2 * C, OVERWRITE, st);
        }
    }
}

// ----------------------------------------------------------------------------------------------
// The documents of the whole sequences

void ring_document_bounds(const AttentionRing* g, const int* tokens, int rows, int n, int eot, int* doc_start,
                          int* doc_end, void* workspace, cudaStream_t st) {
    int *sequence, *travel[2];
    size_t travel_stride;
    layout_gather(&sequence, travel, &travel_stride, (char*)workspace, g, n);
    int N = g->size, c = n / 2, T = N * n;
    for (int batch = 0; batch < rows / g->count; batch++) {
        for (int i = 0; i < g->count; i++)
            cudaCheck(cudaMemcpyAsync((char*)travel[0] + i * travel_stride, tokens + ((size_t)batch * g->count + i) * n,
                                      n * sizeof(int), cudaMemcpyDeviceToDevice, st));
        // At step k each rank holds the tokens of the rank k before it, and puts its chunks in place.
        for (int k = 0; k < N; k++) {
            if (k > 0) ring_wait(g, st);
            if (k + 1 < N) ring_pass(g, travel[k % 2], travel[(k + 1) % 2], travel_stride, n * sizeof(int), st);
            for (int i = 0; i < g->count; i++) {
                int from = ring_origin(g->first + i, k, N);
                const int* arrived = (const int*)((const char*)travel[k % 2] + i * travel_stride);
                for (int half = 0; half < 2; half++)
                    cudaCheck(cudaMemcpyAsync(sequence + (size_t)i * T + (size_t)zigzag_chunk(from, half, N) * c,
                                              arrived + half * c, c * sizeof(int), cudaMemcpyDeviceToDevice, st));
            }
        }
        size_t at = (size_t)batch * g->count * T;
        attention_document_bounds(sequence, g->count, T, eot, doc_start + at, doc_end + at, st);
    }
}
