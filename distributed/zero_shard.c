// distributed/zero_shard.c: ZeRO-1 shard bounds and a tensor's part in a shard.
#include "distributed/zero_shard.h"

int zero_shard_init(ZeroShard* s, size_t param_count, int world_size, int rank, size_t align,
                    char* err) {
    if (world_size < 1 || rank < 0 || rank >= world_size || align == 0) {
        set_err(err, "ZeRO shard: rank %d of %d with alignment %zu", rank, world_size, align);
        return -1;
    }
    size_t W = (size_t)world_size;
    size_t chunks = (param_count + W * align - 1) / (W * align);   // aligned units per rank
    s->param_count = param_count;
    s->shard_size = chunks * align;
    s->padded_count = s->shard_size * W;
    size_t first = (size_t)rank * s->shard_size;
    s->begin = first < param_count ? first : param_count;
    s->end = first + s->shard_size < param_count ? first + s->shard_size : param_count;
    return 0;
}

ZeroShardPart zero_shard_part(const ZeroShard* s, size_t tensor_begin, size_t tensor_count) {
    ZeroShardPart part = {0, 0, 0};
    size_t lo = tensor_begin > s->begin ? tensor_begin : s->begin;
    size_t tensor_end = tensor_begin + tensor_count;
    size_t hi = tensor_end < s->end ? tensor_end : s->end;
    if (lo >= hi) return part;
    part.param_index = lo;
    part.shard_offset = lo - s->begin;
    part.count = hi - lo;
    return part;
}
