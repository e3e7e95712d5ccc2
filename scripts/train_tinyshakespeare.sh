#!/usr/bin/env bash
# Trains a small GPT (d6: 6 layers, 384 channels, 6 heads; T = 256) on tinyshakespeare, the
# target of `make train`. Prepares the data first (scripts/prepare_tinyshakespeare.sh: a 4096-id
# BPE, train and val shards), prints samples on the way, and ends by comparing the validation
# loss with the unigram baseline (a model that ignores context). Checkpoints, the CSV log and
# its chart (loss.svg, scripts/plot_log.py) go to runs/NAME/, NAME the text's file name without
# its extension (tinyshakespeare by default). Every GPU of the machine takes part (--gpus).
# TEXT=path uses another text; extra arguments go to train_gpt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=$(basename "${TEXT:-tinyshakespeare.txt}")
out=$root/runs/${name%.*}

# prepare_data prints the unigram baseline only when it runs; keep it for later runs.
prep_log=$(mktemp)
trap 'rm -f "$prep_log"' EXIT
status=0
data=$("$root/scripts/prepare_tinyshakespeare.sh" 2>"$prep_log") || status=$?
cat "$prep_log" >&2
[ "$status" -eq 0 ] || exit "$status"
mkdir -p "$out"   # only now: a bad TEXT leaves no folder
baseline=$(sed -n 's/.*unigram baseline.*cross-entropy \([0-9.]*\).*/\1/p' "$prep_log")
if [ -n "$baseline" ]; then
    echo "$baseline" > "$out/unigram_baseline.txt"
elif [ -s "$out/unigram_baseline.txt" ]; then
    baseline=$(cat "$out/unigram_baseline.txt")
fi

if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "error: no CUDA device here: the data is ready in $data; run this again on a machine with an NVIDIA GPU" >&2
    exit 1
fi
if [ ! -x "$root/train_gpt" ]; then
    make -C "$root" train_gpt >&2
fi

# 8192 tokens per step, about 40 per epoch. Without dropout a model this size overfits
# tinyshakespeare after ~9 epochs: with a longer schedule the validation loss is lowest near
# step 350 and rises after it. Several GPUs share the 32 sequences of a step.
gpus=$(nvidia-smi -L | grep -c '^GPU')
ranks=()
B=32
if [ "$gpus" -gt 1 ] && [ $((32 % gpus)) -eq 0 ]; then ranks=(--gpus "$gpus"); B=$((32 / gpus)); fi
"$root/train_gpt" ${ranks[@]+"${ranks[@]}"} --model d6 --context 256 -B "$B" -T 256 --total-batch-size 8192 --steps 350 \
    --lr 1e-3 --warmup-steps 25 --min-lr-frac 0.1 --weight-decay 0.1 \
    --train-data "$data/train_*.bin" --val-data "$data/val_*.bin" --tokenizer "$data/tokenizer.bin" \
    --val-every 25 --val-batches 20 --sample-every 125 --sample-tokens 96 --top-k 50 \
    --out-dir "$out" --log "$out/log.csv" "$@"

python3 "$root/scripts/plot_log.py" --title "train_gpt on ${name%.*}" "$out/log.csv" "$out/loss.svg" && echo "loss curves: $out/loss.svg" >&2
val=$(awk -F, 'NR > 1 && $3 != "" { v = $3 } END { print v }' "$out/log.csv")
if [ -n "$baseline" ] && [ -n "$val" ]; then
    awk -v v="$val" -v b="$baseline" 'BEGIN {
        printf "final val loss %.4f vs the unigram baseline %.4f nats/token: %s by %.2f nats\n",
               v, b, v < b ? "better" : "WORSE", v < b ? b - v : v - b
        exit !(v < b) }'
fi
