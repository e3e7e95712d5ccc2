#!/usr/bin/env bash
# tests/programs/test_learning.sh: what train_gpt learns, against the PyTorch reference. GPT-2's recipe
# on tinyshakespeare (d6 on its 4096-id BPE: B 32, T 256, 350 steps, AdamW lr 1e-3 with 25 warmup
# steps, cosine to 0.1 lr, weight decay 0.1, clip 1; make train's shape, with GPT-2's
# architecture and optimizer) must end at a validation loss inside the band
# measured on an H200 for the reference and train_gpt, three seeds each
# (`MODELS=d6-t256 bash scripts/gpu/parity.sh DATASET`, bench/RESULTS.md): a change that makes
# the model learn less per step, or a validation that reads the training data, leaves it. About
# ten seconds on an H200. Needs ./prepare_data, ./train_gpt, the text ($FLASHGPT_TEXT) and a CUDA
# device; says SKIPPED without them. Prints PASS / FAIL lines like tests/lib/test.h.
set -u
cd "$(dirname "$0")/../.."
# On an H200 (2026-12-01) the reference's seeds 1-3 ended at 4.6147-4.6325 and train_gpt's at
# 4.5878-4.6234 (seed 1: 4.6234); the band is the reference's range widened on each side by
# train_gpt's seed spread, 0.035.
LOW=4.579 HIGH=4.668
text=${FLASHGPT_TEXT:-build/texts/tinyshakespeare.txt}
tmp=${FLASHGPT_TMP:-/tmp}/learning
if [ ! -x ./train_gpt ]; then
    echo "SKIPPED learning (./train_gpt is not built: no nvcc)"
    exit 0
fi
if [ ! -f "$text" ]; then
    echo "SKIPPED learning (no TEST_TEXT: $text)"
    exit 0
fi
rm -rf "$tmp"
mkdir -p "$tmp"
if ! ./prepare_data --out-dir "$tmp/data" --vocab-size 4096 --split-blank-lines "$text" > "$tmp/prepare.out" 2>&1; then
    echo "FAIL learning: prepare_data: $(tail -1 "$tmp/prepare.out")"
    exit 1
fi
./train_gpt --model d6 --context 256 -B 32 -T 256 --steps 350 --lr 1e-3 --warmup-steps 25 --min-lr-frac 0.1 \
    --weight-decay 0.1 --grad-clip 1 --seed 1 --val-every 25 --val-batches 20 \
    --train-data "$tmp/data/train_*.bin" --val-data "$tmp/data/val_*.bin" --tokenizer "$tmp/data/tokenizer.bin" \
    --log "$tmp/log.csv" > "$tmp/train.out" 2>&1
status=$?
if grep -q "^error: no CUDA device" "$tmp/train.out"; then
    echo "SKIPPED learning (no CUDA device)"
    exit 0
fi
if [ "$status" -ne 0 ]; then
    echo "FAIL learning: train_gpt: $(tail -1 "$tmp/train.out")"
    exit 1
fi
val=$(awk -F, 'NR > 1 && $3 != "" { v = $3 } END { print v }' "$tmp/log.csv")
if awk -v v="$val" -v lo="$LOW" -v hi="$HIGH" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; then
    echo "PASS learning (final validation loss $val in [$LOW, $HIGH])"
else
    echo "FAIL learning: final validation loss ${val:-missing}, outside [$LOW, $HIGH]"
    exit 1
fi
