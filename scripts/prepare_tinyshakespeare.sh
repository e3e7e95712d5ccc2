#!/usr/bin/env bash
# Tokenizes tinyshakespeare into datasets/tinyshakespeare/: tokenizer.bin (a 4096-id BPE trained
# on the training part), train_*.bin and val_*.bin (one document per paragraph, 10% held out).
# Prints that directory on stdout; everything else goes to stderr. Does nothing when the outputs
# are newer than the text. TEXT=path uses a local text instead of the download.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
text=$("$root/scripts/get_tinyshakespeare.sh")
out=$root/datasets/tinyshakespeare

up_to_date=1
for f in tokenizer.bin train_000000.bin val_000000.bin; do
    if [ ! "$out/$f" -nt "$text" ]; then up_to_date=0; fi
done
if [ "$up_to_date" = 1 ]; then
    echo "$out is up to date with $text" >&2
    echo "$out"
    exit 0
fi

if [ ! -x "$root/prepare_data" ]; then
    make -C "$root" prepare_data >&2
fi
"$root/prepare_data" --vocab-size 4096 --split-blank-lines --out-dir "$out" "$text" >&2
echo "$out"
