// distributed/zero_shard.c: ZeRO-1 shard bounds and a tensor's part in a shard.
#include "distributed/zero_shard.h"

static size_t round_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

// By units: the elements [*lo, *hi) of tensor t that rank r of W owns.
static void unit_range(const ZeroTensor* t, int rank, int world_size, size_t* lo, size_t* hi) {
    size_t units = (t->count + t->unit - 1) / t->unit, W = (size_t)world_size, r = (size_t)rank;
    size_t first = r * units / W, last = (r + 1) * units / W;
    *lo = first * t->unit;
    *hi = last * t->unit < t->count ? last * t->unit : t->count;
}

ZeroShardPart zero_shard_part(const ZeroShard* s, const ZeroTensor* tensors, int i, int rank) {
    ZeroShardPart part = {0, 0, 0};
    size_t tensor_begin = 0, offset = 0, lo, hi;
    for (int j = 0; j < i; j++) {
        tensor_begin += tensors[j].count;
        if (s->by_units) {
            unit_range(&tensors[j], rank, s->world_size, &lo, &hi);
            offset += round_up(hi - lo, s->align);
        }
    }
    if (s->by_units) {
        unit_range(&tensors[i], rank, s->world_size, &lo, &hi);
        lo += tensor_begin;
        hi += tensor_begin;
    } else {
        size_t first = (size_t)rank * s->shard_size;
        size_t shard_end = first + s->shard_size < s->param_count ? first + s->shard_size : s->param_count;
        size_t tensor_end = tensor_begin + tensors[i].count;
        lo = tensor_begin > first ? tensor_begin : first;
        hi = tensor_end < shard_end ? tensor_end : shard_end;
        offset = lo - first;
    }
    if (lo >= hi) return part;
    part.param_index = lo;
    part.shard_offset = offset;
    part.count = hi - lo;
    return part;
}

ZeroShardPart zero_shard_piece(const ZeroShard* s, const ZeroTensor* tensors, int i, int rank, size_t lo, size_t hi) {
    ZeroShardPart part = zero_shard_part(s, tensors, i, rank), none = {0, 0, 0};
    size_t first = part.param_index > lo ? part.param_index : lo;
    size_t last = part.param_index + part.count < hi ? part.param_index + part.count : hi;
    if (part.count == 0 || first >= last) return none;
    part.shard_offset += first - part.param_index;
    part.param_index = first;
    part.count = last - first;
    return part;
}

int zero_shard_init(ZeroShard* s, const ZeroTensor* tensors, int n, int world_size, int rank, int by_units,
                    size_t align, char* err) {
    if (world_size < 1 || rank < 0 || rank >= world_size || align == 0) {
        set_err(err, "ZeRO shard: rank %d of %d with alignment %zu", rank, world_size, align);
        return -1;
    }
    s->param_count = 0;
    for (int i = 0; i < n; i++) {
        if (by_units && tensors[i].unit == 0) {
            set_err(err, "ZeRO shard: tensor %d has units of 0 elements", i);
            return -1;
        }
        s->param_count += tensors[i].count;
    }
    s->align = align;
    s->world_size = world_size;
    s->rank = rank;
    s->by_units = by_units;
    size_t P = s->param_count, W = (size_t)world_size;
    if (by_units) {
        s->padded_count = P;
        s->shard_size = s->owned = 0;
        for (int i = 0; i < n; i++) {
            size_t lo, hi;
            unit_range(&tensors[i], rank, world_size, &lo, &hi);
            s->shard_size += round_up(hi - lo, align);
            s->owned += hi - lo;
        }
        s->begin = s->end = 0;
        return 0;
    }
    size_t chunks = (P + W * align - 1) / (W * align);   // aligned units per rank
    s->shard_size = chunks * align;
    s->padded_count = s->shard_size * W;
    size_t first = (size_t)rank * s->shard_size;
    s->begin = first < P ? first : P;
    s->end = first + s->shard_size < P ? first + s->shard_size : P;
    s->owned = s->end - s->begin;
    return 0;
}
