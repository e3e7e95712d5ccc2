"""scripts/shard_batches.py: train_gpt's data in numpy, for the PyTorch reference
(scripts/train_torch_reference.py): the token shards as one stream, the vocabulary and the
<|endoftext|> of a tokenizer file, and the batches that data/dataloader.c gives one rank, in its
order, written here from its description.

Sample i is the tokens [i*T, i*T + T] of the stream (T+1 of them), so an epoch holds
S = (N-1)//T samples. With rows aligned to documents (train_gpt --align-documents) sample i is
instead the T+1 tokens from the i-th start of a walk over the stream: a position holding the
document token (<|endoftext|>) starts a sample when it lies at or past the previous sample's
start + T and has T tokens after it in the stream; S is the number of such starts. An epoch has
S//B batches, batch k the samples at positions k*B ... k*B + B-1 of the epoch's order: the
positions themselves, or shuffled by a permutation of [0, S) that the seed and the epoch give: a
4-round Feistel network on [0, 4^h), 4^h the first power of 4 >= S (h >= 1), whose round
function is splitmix64 (common/rng.h), applied again while the value lies past S.
tests/mirrors/test_data_order.py checks these batches against the C loader's.
"""
import glob
import struct

try:
    import numpy as np
except ImportError:
    np = None  # the script says so once its arguments are read (needed.exit_without)

from output_file import Failure

SHARD_MAGIC, HEADER_INTS = 20240520, 256
TOKENIZER_MAGIC, TOKENIZER_VERSION = 0x4B544746, 1
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


def read_tokenizer(path):
    """The vocabulary size and the <|endoftext|> id of a flashgpt tokenizer file (its header, as
    tokenizer/tokenizer_file.c writes it: magic, version 1, vocab size, merges, <|endoftext|>)."""
    try:
        with open(path, "rb") as f:
            header = f.read(32)
    except OSError as e:
        raise Failure(f"{path}: {e.strerror.lower()}")
    if len(header) < 32:
        raise Failure(f"{path}: not a tokenizer file (too short)")
    magic, version, vocab, _, eot = struct.unpack_from("<5i", header)
    if magic != TOKENIZER_MAGIC or version != TOKENIZER_VERSION or not 0 <= eot < vocab:
        raise Failure(f"{path}: not a tokenizer file (magic {magic:#x}, version {version}, <|endoftext|> {eot} of "
                      f"{vocab} ids)")
    return vocab, eot


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


def document_starts(stream, T, document_token):
    """The first positions of the samples aligned to documents (an int64 array, in stream order):
    of the positions holding document_token, each at or past the previous one taken + T, while T
    tokens follow it in the stream."""
    documents = np.flatnonzero(np.asarray(stream) == document_token)
    starts, at = [], 0
    while True:
        i = np.searchsorted(documents, at)  # the first document at or past at
        if i == len(documents) or documents[i] + T > len(stream) - 1:
            return np.array(starts, dtype=np.int64)
        starts.append(int(documents[i]))
        at = starts[-1] + T


class Batches:
    """The batches (B, T+1) of one rank of one (rank 0 of 1) from a token stream, epoch after
    epoch: shuffled every epoch from seed, or in stream order (validation); the samples start at
    multiples of T, or with a document_token at the documents' starts (document_starts)."""

    def __init__(self, stream, B, T, shuffle, seed, document_token=None):
        self.stream, self.B, self.T, self.shuffle, self.seed = stream, B, T, shuffle, seed
        if document_token is None:
            self.starts = None
            self.samples = (len(stream) - 1) // T
        elif not np.any(np.asarray(stream) == document_token):
            raise Failure(f"none of its {len(stream)} tokens is {document_token}, the token that starts a document")
        else:
            self.starts = document_starts(stream, T, document_token)
            self.samples = len(self.starts)
        self.per_epoch = self.samples // B
        if self.per_epoch == 0:
            rows = "" if document_token is None else f" starting at a document (token {document_token})"
            raise Failure(f"{len(stream)} tokens make {self.samples} samples{rows}, fewer than one batch of B {B}, "
                          f"T {T}")
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
        firsts = picks * self.T if self.starts is None else self.starts[picks]
        rows = np.stack([self.stream[i:i + self.T + 1] for i in firsts]).astype(np.int64)
        self.step += 1
        if self.step == self.per_epoch:
            self.epoch, self.step = self.epoch + 1, 0
        return rows
