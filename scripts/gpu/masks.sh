#!/usr/bin/env bash
# scripts/gpu/masks.sh: the training comparison of documents and sliding windows on one GPU, from
# the repository root, about a minute on an H200:
#   bash scripts/gpu/masks.sh DATASET_DIR
# DATASET_DIR holds prepare_data's output (train_*.bin, val_*.bin, tokenizer.bin) of a real text
# made of documents, each starting with <|endoftext|> (`bash scripts/make_parity_text.sh python
# DIR`: each source file of Python's standard library one document; nothing is fetched). Two runs
# of the modern recipe (--arch modern, Muon at its defaults), d12, at the same tokens per step
# (16 384) for one epoch of the text, seed 1, warmup over the first 10% of the steps, a cosine to
# 0.1, clip 1, validation on 20 batches (327 680 tokens) every 25 steps, one at a time:
#   masked  -T 8192 -B 2 --document-mask --window-pattern $WINDOWS: each row sees its own
#           document alone, and layer l at most item l mod 2 of WINDOWS (2048,512: long and
#           short windows alternating) of its last keys;
#   dense   -T 1024 -B 16: each row sees every earlier token of its sequence, across documents.
# It prints the table of scripts/compare_curves.py --runs against the dense run's final
# validation loss: each run's final validation loss, the step and the training time (validation
# excluded) at which its curve reaches that loss, their shares of the dense run's, and its
# tokens/s; then the curves side by side: whether the masked run reaches the dense run's final
# loss, and in how much training time (bench/RESULTS.md, documents and sliding windows: at 16 384
# tokens a step it does not, the two sequences a step holds against sixteen deciding it).
# Logs go to $OUT/masks when OUT is set, else build/masks. Exits non-zero when a step fails, and
# its last line names the steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 1 "$@"
DATA=${1:-}
[ -n "$DATA" ] || gpu_refuse "the dataset folder is needed"
gpu_dataset "$DATA"
WINDOWS=${WINDOWS:-2048,512}
PYTHON=${PYTHON:-python3}
LOGS=${OUT:-build}/masks
mkdir -p "$LOGS"

echo "== build ($(elapsed))"
gpu_build_train_gpt "$LOGS"

# The runs: name, T, B and their own options.
RUNS=("masked 8192 2 --document-mask --window-pattern $WINDOWS" "dense 1024 16")
TOKENS_PER_STEP=16384
tokens=$(gpu_training_tokens "$DATA")
steps=$(( (${tokens:-0} - 1) / TOKENS_PER_STEP ))
echo "data: $DATA, ${tokens:-?} training tokens: one epoch is $steps steps of $TOKENS_PER_STEP tokens"
[ "${tokens:-0}" -ge 5000000 ] || echo "note: fewer than 5M training tokens"
warmup=$(( steps / 10 ))
for run in "${RUNS[@]}"; do
    read -r name T B options <<< "$run"
    echo "== $name: -T $T -B $B $options ($(elapsed))"
    rm -f "$LOGS/$name.csv"
    # shellcheck disable=SC2086  # the run's options are words
    ./train_gpt --model d12 --arch modern --optimizer muon --context "$T" -T "$T" -B "$B" --steps "$steps" \
        --warmup-steps "$warmup" --min-lr-frac 0.1 --grad-clip 1 --seed 1 --val-every 25 --val-batches 20 \
        --train-data "$DATA/train_*.bin" --val-data "$DATA/val_*.bin" --tokenizer "$DATA/tokenizer.bin" $options \
        --log "$LOGS/$name.csv" > "$LOGS/$name.out" 2>&1 || { tail -2 "$LOGS/$name.out"; step_failed "$name"; }
    grep -E "^(model|batch|done):" "$LOGS/$name.out"
done

echo "== the masked run against the dense run's final validation loss ($(elapsed))"
logs=()
for run in "${RUNS[@]}"; do
    read -r name _ <<< "$run"
    [ -f "$LOGS/$name.csv" ] && logs+=("$LOGS/$name.csv")
done
"$PYTHON" scripts/compare_curves.py --runs --baseline dense ${logs[@]+"${logs[@]}"} | tee "$LOGS/masks.md"
[ "${PIPESTATUS[0]}" = 0 ] || step_failed "table"
gpu_finish
