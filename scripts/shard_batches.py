"""scripts/shard_batches.py: train_gpt's data in numpy, for the PyTorch reference
(scripts/train_torch_reference.py): the token shards as one stream, and the batches that
data/dataloader.c gives one rank, in its order, written here from its description.

Sample i is the tokens [i*T, i*T + T] of the stream (T+1 of them); an epoch holds S = (N-1)//T
samples and S//B batches, batch k the samples at positions k*B ... k*B + B-1 of the epoch's
order: the positions themselves, or shuffled by a permutation of [0, S) that the seed and the
epoch give: a 4-round Feistel network on [0, 4^h), 4^h the first power of 4 >= S (h >= 1), whose
round function is splitmix64 (common/rng.h), applied again while the value lies past S.
tests/mirrors/test_data_order.py checks these batches against the C loader's.
"""
import glob

try:
    import numpy as np
except ImportError:
    np = None  # the script says so once its arguments are read (needed.exit_without)

from output_file import Failure

SHARD_MAGIC, HEADER_INTS = 20240520, 256
TOKEN_TYPES = {1: "<u2", 2: "<u4"}
FEISTEL_ROUNDS = 4


def open_stream(pattern):
    """The shards matching pattern, in sorted order, as one token array, and the largest
    vocabulary size their headers give (0 when none does)."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise Failure(f"{pattern}: no file matches")
    shards, vocab = [], 0
    for path in paths:
        header = np.fromfile(path, dtype=np.int32, count=HEADER_INTS)
        if len(header) < HEADER_INTS or header[0] != SHARD_MAGIC or header[1] not in TOKEN_TYPES:
            raise Failure(f"{path}: not a token shard")
        dtype = TOKEN_TYPES[int(header[1])]
        tokens = np.memmap(path, dtype=dtype, mode="r", offset=4 * HEADER_INTS)
        if len(tokens) != header[2]:
            raise Failure(f"{path}: the header says {header[2]} tokens, the file holds {len(tokens)}")
        shards.append(tokens)
        vocab = max(vocab, int(header[3]))
    return np.concatenate(shards) if len(shards) > 1 else shards[0], vocab


def splitmix64(x):
    """common/rng.h's mixing function of each element of the uint64 array x (arithmetic mod 2^64)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def uint64_word(v):
    """The integer v mod 2^64 as a uint64 array of one element."""
    return np.array([v % 2 ** 64], dtype=np.uint64)


def shuffled_positions(positions, n, seed, epoch):
    """Where the positions (an int array, each in [0, n)) go in epoch's permutation of [0, n)
    under seed (an integer taken mod 2^64, as train_gpt's --seed)."""
    half = 1
    while 4 ** half < n:
        half += 1
    width, mask = np.uint64(half), np.uint64((1 << half) - 1)
    key = splitmix64(uint64_word(seed) ^ splitmix64(uint64_word(epoch)))
    round_keys = [splitmix64(key + np.uint64(r)) for r in range(FEISTEL_ROUNDS)]

    def permute(x):
        left, right = x >> width, x & mask
        for round_key in round_keys:
            left, right = right, left ^ (splitmix64(right ^ round_key) & mask)
        return (left << width) | right

    x = permute(np.asarray(positions, dtype=np.uint64))
    outside = x >= np.uint64(n)
    while outside.any():  # walks the cycle back into [0, n)
        x[outside] = permute(x[outside])
        outside = x >= np.uint64(n)
    return x.astype(np.int64)


class Batches:
    """The batches (B, T+1) of one rank of one (rank 0 of 1) from a token stream, epoch after
    epoch: shuffled every epoch from seed, or in stream order (validation)."""

    def __init__(self, stream, B, T, shuffle, seed):
        self.stream, self.B, self.T, self.shuffle, self.seed = stream, B, T, shuffle, seed
        self.samples = (len(stream) - 1) // T
        self.per_epoch = self.samples // B
        if self.per_epoch == 0:
            raise Failure(f"{len(stream)} tokens make fewer than one batch of B {B}, T {T}")
        self.reset()

    def reset(self):
        """Back to the first batch of epoch 0."""
        self.epoch, self.step = 0, 0

    def next(self):
        """The next batch's rows, each a sample's T+1 tokens (int64): the inputs are their first
        T, the targets their last T."""
        picks = np.arange(self.step * self.B, (self.step + 1) * self.B)
        if self.shuffle:
            picks = shuffled_positions(picks, self.samples, self.seed, self.epoch)
        rows = np.stack([self.stream[i * self.T:i * self.T + self.T + 1] for i in picks]).astype(np.int64)
        self.step += 1
        if self.step == self.per_epoch:
            self.epoch, self.step = self.epoch + 1, 0
        return rows
