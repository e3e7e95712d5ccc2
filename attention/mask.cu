// attention/mask.cu: attention/mask.h. The document bounds of a sequence are two scans over its
// tokens (B, T): doc_start[t] the last <|endoftext|> at or before t (0 when none), doc_end[t]
// the first one after t, less 1 (T - 1 when none). One thread block per sequence: each thread
// scans a run of consecutive positions, the runs' results are combined across the block (a
// prefix max and a suffix min over the threads), and each thread then writes its run.
#include "attention/mask.h"

const char* attention_mask_unsupported(const AttentionMask* m, AttentionShape s) {
    if (!m) return NULL;
    if (m->window < 0) return "attention mask: the window must be 0 (none) or a number of keys";
    if (!m->doc_start != !m->doc_end) return "attention mask: documents need both their starts and their ends";
    if (m->query0 < 0 || m->key0 < 0) return "attention mask: the positions of the first query and key must not be negative";
    if ((m->query0 || m->key0) && s.B != 1) return "attention mask: a call at other positions holds one sequence";
    return NULL;
}

#define BOUNDS_THREADS 1024

__global__ void __launch_bounds__(BOUNDS_THREADS)
document_bounds_kernel(const int* tokens, int T, int eot, int* doc_start, int* doc_end) {
    __shared__ int last_before[BOUNDS_THREADS], first_after[BOUNDS_THREADS];
    const int i = threadIdx.x, per = (int)ceil_div(T, BOUNDS_THREADS);
    const long long row = (long long)blockIdx.x * T;
    const int begin = min(i * per, T), end = min(begin + per, T);
    int last = 0, first = T;   // the run's last and first <|endoftext|>, or what stands for none
    for (int t = begin; t < end; t++)
        if (tokens[row + t] == eot) {
            last = t;
            first = min(first, t);
        }
    last_before[i] = last;
    first_after[i] = first;
    __syncthreads();
    // Inclusive scans by doubling: last_before[i] over threads 0..i, first_after[i] over i..end.
    for (int offset = 1; offset < BOUNDS_THREADS; offset *= 2) {
        int l = i >= offset ? last_before[i - offset] : 0;
        int f = i + offset < BOUNDS_THREADS ? first_after[i + offset] : T;
        __syncthreads();
        last_before[i] = max(last_before[i], l);
        first_after[i] = min(first_after[i], f);
        __syncthreads();
    }
    int start = i > 0 ? last_before[i - 1] : 0;
    for (int t = begin; t < end; t++) {
        if (tokens[row + t] == eot) start = t;
        doc_start[row + t] = start;
    }
    int next = i + 1 < BOUNDS_THREADS ? first_after[i + 1] : T;
    for (int t = end - 1; t >= begin; t--) {
        doc_end[row + t] = next - 1;
        if (tokens[row + t] == eot) next = t;
    }
}

void attention_document_bounds(const int* tokens, int B, int T, int eot, int* doc_start, int* doc_end,
                               cudaStream_t stream) {
    if (B < 1 || T < 1) die("attention_document_bounds: B and T must be at least 1");
    document_bounds_kernel<<<B, BOUNDS_THREADS, 0, stream>>>(tokens, T, eot, doc_start, doc_end);
    cudaCheckLaunch();
}
