#!/usr/bin/env python3
"""tests/mirrors/test_data_order.py: the PyTorch reference reads train_gpt's data order. The batches of
scripts/shard_batches.py (the reference's loader) against those of data/dataloader.c, printed by
build/tests/mirrors/data_order, token for token: shuffled for several seeds (negative ones and ones past
2^32 among them, as --seed takes them), shapes and shards (a stream over shards of both token
widths, one shorter than a sample; a single shard; sample counts that are powers of 4 and
not), over two epoch boundaries; and in stream order, as validation reads it. The same with rows
aligned to documents (train_gpt --align-documents), over a stream of documents of every length
from one token to several samples, text before the first, documents across shard boundaries;
both refuse shards without the document token. Also that each epoch's shuffle is a permutation
of its samples. Shards go to $FLASHGPT_TMP; prints PASS / FAIL lines like tests/lib/test.h.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from case import Case  # noqa: E402
from output_file import Failure  # noqa: E402
from shard_batches import Batches, open_stream, shuffled_positions  # noqa: E402

TMP = os.path.abspath(os.environ.get("FLASHGPT_TMP") or tempfile.mkdtemp())
DATA_ORDER = os.path.join(ROOT, os.environ.get("BUILD", "build"), "tests", "mirrors", "data_order")
SEEDS = (1, 2, 1337, -5, 2 ** 62 + 3)


def write_shards(folder, sizes, vocab, stream=None):
    """Shards of stream (by default 0, 1, 2, ...: the token at each position is the position), cut
    into shards of sizes, the odd ones uint32 (version 2), the others uint16 (version 1). Returns
    their glob."""
    os.makedirs(folder, exist_ok=True)
    if stream is None:
        stream = np.arange(sum(sizes))
    start = 0
    for i, n in enumerate(sizes):
        version, dtype = (2, "<u4") if i % 2 else (1, "<u2")
        header = np.zeros(256, dtype="<i4")
        header[:4] = [20240520, version, n, vocab]
        with open(os.path.join(folder, f"train_{i:06d}.bin"), "wb") as f:
            f.write(header.tobytes() + stream[start:start + n].astype(dtype).tobytes())
        start += n
    return os.path.join(folder, "train_*.bin")


DOCUMENT_TOKEN = 60000


def document_stream(n, seed):
    """A stream of n tokens of documents, each DOCUMENT_TOKEN then its text (the position mod
    DOCUMENT_TOKEN): a few tokens before the first, then documents of 1 to 120 tokens, short ones
    most often."""
    rng = np.random.default_rng(seed)
    stream = np.arange(n) % DOCUMENT_TOKEN
    at = 3
    while at < n:
        stream[at] = DOCUMENT_TOKEN
        at += int(min(rng.geometric(1 / 12), 120))
    return stream


def c_batches(pattern, B, T, shuffle, seed, count, document_token=None):
    """The first count batches (count, B, T+1) of the C loader, or the error it printed."""
    args = [DATA_ORDER, pattern, str(B), str(T), str(int(shuffle)), str(seed), str(count)]
    args += [] if document_token is None else [str(document_token)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        return f"data_order exited {result.returncode}: {result.stderr.strip()}"
    return np.array(result.stdout.split(), dtype=np.int64).reshape(count, B, T + 1)


def python_batches(pattern, B, T, shuffle, seed, count, document_token=None):
    batches = Batches(open_stream(pattern)[0], B, T, shuffle, seed, document_token)
    return np.stack([batches.next() for _ in range(count)])


def compare(case, pattern, B, T, shuffle, seed, epochs, document_token=None):
    per_epoch = Batches(open_stream(pattern)[0], B, T, shuffle, seed, document_token).per_epoch
    count = epochs * per_epoch + 1  # into the epoch after the last whole one
    want = c_batches(pattern, B, T, shuffle, seed, count, document_token)
    what = f"B {B} T {T} {'seed ' + str(seed) if shuffle else 'in order'}"
    if document_token is not None:
        what += ", aligned to documents"
        if not isinstance(want, str) and not (want[:, :, 0] == document_token).all():
            want = "a row of the C loader does not start at a document"
    if not case.check(not isinstance(want, str), f"{what}: {want}"):
        return
    got = python_batches(pattern, B, T, shuffle, seed, count, document_token)
    differ = np.argwhere((got != want).any(axis=2))
    case.check(len(differ) == 0, f"{what}: {len(differ)} samples differ, the first batch {differ[0][0]} row "
                                 f"{differ[0][1]}" if len(differ) else "")


def main():
    case = Case("data_order: the reference's loader is built")
    case.check(os.access(DATA_ORDER, os.X_OK), f"{DATA_ORDER} is not built (make test builds it)")
    case.end()
    if Case.failures:
        return 1
    streams = (("a stream over three shards", write_shards(os.path.join(TMP, "order_many"), (1000, 37, 2501), 100000),
                ((3, 16), (1, 7), (5, 1), (4, 55))),  # (4, 55): 64 samples, a power of 4
               ("one shard", write_shards(os.path.join(TMP, "order_one"), (60000,), 65536), ((8, 32),)))
    for name, pattern, shapes in streams:
        case = Case(f"data_order: {name}, shuffled: the reference's batches are train_gpt's")
        for B, T in shapes:
            for seed in SEEDS:
                compare(case, pattern, B, T, True, seed, 2)
        case.end()
        case = Case(f"data_order: {name}, in stream order (validation): the same batches")
        for B, T in shapes:
            compare(case, pattern, B, T, False, 0, 1)
        case.end()
    many = write_shards(os.path.join(TMP, "order_documents"), (1000, 37, 2501), 100000, document_stream(3538, 5))
    one = write_shards(os.path.join(TMP, "order_documents_one"), (60000,), 65536, document_stream(60000, 6))
    documents = (("a stream of documents over three shards", many, ((3, 16), (1, 7), (2, 1), (4, 40))),
                 ("one shard of documents", one, ((8, 32), (2, 256))))
    for name, pattern, shapes in documents:
        case = Case(f"data_order: {name}, aligned and shuffled: the reference's batches are train_gpt's")
        for B, T in shapes:
            for seed in SEEDS:
                compare(case, pattern, B, T, True, seed, 2, DOCUMENT_TOKEN)
        case.end()
        case = Case(f"data_order: {name}, aligned in stream order: the same batches")
        for B, T in shapes:
            compare(case, pattern, B, T, False, 0, 1, DOCUMENT_TOKEN)
        case.end()
    case = Case("data_order: shards without the document token are refused by both loaders")
    pattern = streams[0][1]
    want = c_batches(pattern, 3, 16, True, 1, 1, DOCUMENT_TOKEN)
    case.check(isinstance(want, str) and "the token that starts a document" in want, f"the C loader: {want}")
    try:
        Batches(open_stream(pattern)[0], 3, 16, True, 1, DOCUMENT_TOKEN)
        case.check(False, "the reference's loader took them")
    except Failure as e:
        case.check("the token that starts a document" in str(e), f"the reference's loader: {e}")
    case.end()
    case = Case("data_order: each epoch's shuffle is a permutation of its samples")
    for n in (1, 2, 3, 4, 5, 17, 64, 65, 1000, 4097):
        for seed in SEEDS:
            for epoch in (0, 1, 7):
                order = shuffled_positions(np.arange(n), n, seed, epoch)
                case.check(sorted(order) == list(range(n)), f"n {n} seed {seed} epoch {epoch}: {order[:8]}...")
    first, second = (shuffled_positions(np.arange(1000), 1000, 1, epoch) for epoch in (0, 1))
    case.check((first != np.arange(1000)).any() and (first != second).any(),
               "1000 samples in stream order, or in the same order two epochs")
    case.end()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
