#!/usr/bin/env bash
# scripts/gpu/muon.sh: AdamW against Muon on one GPU, in one command from the repository root:
#   bash scripts/gpu/muon.sh DATASET_DIR
# DATASET_DIR holds prepare_data's output (train_*.bin, val_*.bin, tokenizer.bin) of a real text
# of at least 5M tokens (scripts/make_parity_text.sh python DIR makes one; nothing is fetched).
# It builds train_gpt, then trains d12 (B 16, T 1024) for one epoch with AdamW at each rate of
# ADAMW_LRS (3e-4 6e-4 1.2e-3; weight decay 0.1) and with Muon at each of MUON_LRS (0.01 0.02
# 0.04; momentum 0.95, Adam (0.8, 0.95) at 0.001 for the embeddings and 0.002 for the vectors, no
# weight decay): warmup over the first 10% of the steps, a cosine to 0.1, clip 1, validation on
# 20 batches every 25 steps, seed 1, one run at a time. It prints a table: each run's final
# validation loss, the step and the training time (the steps' wall time, validation excluded)
# at which its curve first reaches the best AdamW run's final validation loss (linearly between
# validations), and its tokens/s. Then the step time of AdamW and Muon at d12, T 1024, B 64 and
# B 16 (30 steps each on the same data, the first left out), and the update's share of a step
# (--profile). About 2.5 minutes on an H200 for a text of 7.5M tokens (142 s, bench/RESULTS.md,
# optimizers). Logs go to $OUT/muon when OUT is set, else build/muon. Exits non-zero when a run
# fails, its last line naming the runs that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 1 "$@"
DATA=${1:-}
[ -n "$DATA" ] || gpu_refuse "give the dataset folder"
gpu_dataset "$DATA"
PYTHON=${PYTHON:-python3}
ADAMW_LRS=${ADAMW_LRS:-"3e-4 6e-4 1.2e-3"}
MUON_LRS=${MUON_LRS:-"0.01 0.02 0.04"}
LOGS=${OUT:-build}/muon
mkdir -p "$LOGS"

echo "== build ($(elapsed))"
gpu_build_train_gpt "$LOGS"

B=16 T=1024
tokens=$(gpu_training_tokens "$DATA")
STEPS=$(( (tokens - 1) / T / B ))
WARMUP=$(( STEPS / 10 ))
echo "data: $DATA, $tokens training tokens: one epoch is $STEPS steps of B $B, T $T"
[ "$tokens" -ge 5000000 ] || echo "note: fewer than 5M training tokens"

# train <log> [ARGS]: one d12 run of the epoch, its CSV in <log>.csv and its output in <log>.out.
train() {
    local log=$1
    shift
    ./train_gpt --model d12 --context "$T" -T "$T" -B "$B" --steps "$STEPS" --warmup-steps "$WARMUP" --min-lr-frac 0.1 \
        --grad-clip 1 --seed 1 --val-every 25 --val-batches 20 --train-data "$DATA/train_*.bin" \
        --val-data "$DATA/val_*.bin" --tokenizer "$DATA/tokenizer.bin" --log "$log.csv" "$@" > "$log.out" 2>&1 ||
        { echo "   $(basename "$log") failed: $(tail -1 "$log.out")"; step_failed "$(basename "$log")"; }
}

runs=()
for lr in $ADAMW_LRS; do
    echo "== adamw lr $lr ($(elapsed))"
    rm -f "$LOGS/adamw-$lr.csv"
    train "$LOGS/adamw-$lr" --optimizer adamw --lr "$lr" --weight-decay 0.1
    runs+=("adamw-$lr")
done
for lr in $MUON_LRS; do
    echo "== muon lr $lr ($(elapsed))"
    rm -f "$LOGS/muon-$lr.csv"
    train "$LOGS/muon-$lr" --optimizer muon --lr "$lr"
    runs+=("muon-$lr")
done

echo "== the runs against the best AdamW run's final validation loss ($(elapsed))"
logs=()
for run in "${runs[@]}"; do [ -f "$LOGS/$run.csv" ] && logs+=("$LOGS/$run.csv"); done
"$PYTHON" scripts/compare_curves.py --runs "${logs[@]}" | tee "$LOGS/table.md"
[ "${PIPESTATUS[0]}" = 0 ] || step_failed "table"

echo "== step time, 30 steps of d12 at T $T ($(elapsed))"
echo "| optimizer | B | ms per step | tokens/s | update ms (--profile) |"
echo "|---|---|---|---|---|"
for batch in 64 16; do
    for optimizer in adamw muon; do
        log="$LOGS/speed-$optimizer-B$batch.out"
        ./train_gpt --model d12 --context "$T" -T "$T" -B "$batch" --steps 30 --optimizer "$optimizer" --val-every 0 \
            --train-data "$DATA/train_*.bin" --profile 20 > "$log" 2>&1 || { step_failed "speed $optimizer B $batch"; continue; }
        # The profile's update row: its total ms and share of the step (after the 20-character name).
        update=$(grep -m1 "^update" "$log" | cut -c21- | awk '{print $3 " (" $4 "%)"}')
        sed -n "s/^done: \([0-9.]*\)K tokens.s.*/\1/p" "$log" | while read -r k; do
            awk -v k="$k" -v b="$batch" -v o="$optimizer" -v t="$T" -v u="$update" \
                'BEGIN { printf "| %s | %d | %.1f | %.1fK | %s |\n", o, b, b * t / k, k, u }'
        done
    done
done
echo "== done ($(elapsed)), logs in $LOGS"
gpu_finish
