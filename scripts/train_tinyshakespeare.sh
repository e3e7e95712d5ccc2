#!/usr/bin/env bash
# Trains a small GPT (d6: 6 layers, 384 channels, 6 heads; T = 256) on tinyshakespeare, the
# target of `make train`, with the recipe that learns it fastest (bench/RESULTS.md, make
# train): the 2026 preset (--arch 2026: Muon and its schedule at the preset's settings), 150
# steps (about four epochs of the text; past them the validation loss rises as the model learns
# the training text by heart). Prepares the data first (scripts/prepare_tinyshakespeare.sh: a 4096-id
# BPE, train and val shards), prints samples on the way, and ends by comparing the validation
# loss with the unigram baseline (a model that ignores context). Checkpoints, the CSV log and
# its chart (loss.svg, scripts/plot_log.py) go to runs/NAME/, NAME the data's as
# prepare_tinyshakespeare.sh names it (tinyshakespeare by default), or when an earlier run has
# that folder (it is not empty) to the first of runs/NAME-2/, runs/NAME-3/, ... missing or empty:
# a run never writes over another's files.
# Every GPU of the machine takes part (--gpus). TEXT=path uses another text, whose data never
# replaces a dataset made otherwise (prepare_tinyshakespeare.sh then takes datasets/NAME-2, ...,
# and the run runs/NAME-2); extra arguments go to train_gpt (-h or --help first prints this).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)

# The run's folder: the first of base, base-2, base-3, ... that is missing or empty.
run_folder() {
    local base=$1 dir=$1 n=1
    while [ -e "$dir" ] && { [ ! -d "$dir" ] || [ -n "$(ls -A "$dir")" ]; }; do
        n=$((n + 1))
        dir=$base-$n
    done
    echo "$dir"
}

# prepare_data prints the unigram baseline only when it runs; it is kept with the data for later
# runs.
prep_log=$(mktemp)
trap 'rm -f "$prep_log"' EXIT
status=0
data=$("$root/scripts/prepare_tinyshakespeare.sh" 2>"$prep_log") || status=$?
cat "$prep_log" >&2
[ "$status" -eq 0 ] || exit "$status"
baseline=$(sed -n 's/.*unigram baseline.*cross-entropy \([0-9.]*\).*/\1/p' "$prep_log")
if [ -n "$baseline" ]; then
    echo "$baseline" > "$data/unigram_baseline.txt"
elif [ -s "$data/unigram_baseline.txt" ]; then
    baseline=$(cat "$data/unigram_baseline.txt")
fi
name=$(basename "$data")   # NAME, as prepare_tinyshakespeare.sh names the data's folder
out=$(run_folder "$root/runs/$name")

if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "error: no CUDA device here: the data is ready in $data and the run would go to $out; run this again on a machine with an NVIDIA GPU" >&2
    exit 1
fi
mkdir -p "$out"   # only now: a bad TEXT or a machine without a GPU leaves no folder
echo "the run goes to $out" >&2
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
"$root/train_gpt" ${ranks[@]+"${ranks[@]}"} --model d6 --arch 2026 --context 256 -B "$B" -T 256 \
    --total-batch-size 8192 --steps 150 --warmup-steps 25 \
    --train-data "$data/train_*.bin" --val-data "$data/val_*.bin" --tokenizer "$data/tokenizer.bin" \
    --val-every 25 --val-batches 20 --sample-every 125 --sample-tokens 96 --top-k 50 \
    --out-dir "$out" --log "$out/log.csv" "$@"

python3 "$root/scripts/plot_log.py" --title "train_gpt on $name" "$out/log.csv" "$out/loss.svg" && echo "loss curves: $out/loss.svg" >&2
val=$(awk -F, 'NR > 1 && $3 != "" { v = $3 } END { print v }' "$out/log.csv")
if [ -n "$baseline" ] && [ -n "$val" ]; then
    awk -v v="$val" -v b="$baseline" 'BEGIN {
        printf "final val loss %.4f vs the unigram baseline %.4f nats/token: %s by %.2f nats\n",
               v, b, v < b ? "better" : "WORSE", v < b ? b - v : v - b
        exit !(v < b) }'
fi
