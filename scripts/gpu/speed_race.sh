#!/usr/bin/env bash
# train_gpt against PyTorch on a GPU machine, in one command from the repository root:
#   bash scripts/gpu/speed_race.sh
# trains d12 (GPT-2 124M) on random tokens of GPT-2's vocabulary at T = 1024 (B = 64),
# T = 16384 (B = 4) and T = 65536 (B = 1), first with train_gpt (its --profile breakdown of one
# step included), then with scripts/bench_torch_gpt2.py (torch.compile, SDPA) on the same shapes,
# and prints tokens/s and peak memory side by side; nvidia-smi logs the SM clock, power and
# throttle reasons meanwhile (gpu-clocks.csv). Logs go to $OUT when set, else build/speed-logs.
# About 6 minutes on an H200. Exits non-zero when a step fails, and its last line names the
# steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 0 "$@"
LOGS=${OUT:-build/speed-logs}
PYTHON=${PYTHON:-python3}
SHAPES=${SHAPES:-"1024:64 16384:4 65536:1"}
STEPS=${STEPS:-20}
mkdir -p "$LOGS"

echo "== build ($(elapsed))"
gpu_build_train_gpt "$LOGS"
shards=build/speed-race-data
mkdir -p "$shards"
"$PYTHON" scripts/random_tokens.py "$shards/random_000000.bin" $((2 * 65536 * 2 + 1)) || step_failed "random tokens"
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
        --format=csv -lms 200 > "$LOGS/gpu-clocks.csv" 2>&1 &
    clocks_pid=$!
    trap 'kill $clocks_pid 2> /dev/null' EXIT
fi

for shape in $SHAPES; do
    T=${shape%:*} B=${shape#*:}
    echo "== train_gpt T $T B $B ($(elapsed))"
    ./train_gpt --model d12 --context "$T" -T "$T" -B "$B" --steps "$STEPS" --profile=5 \
        --train-data "$shards/random_*.bin" --val-data '' > "$LOGS/train_gpt-T$T.log" 2>&1 ||
        { tail -3 "$LOGS/train_gpt-T$T.log"; step_failed "train_gpt T $T"; }
done
for shape in $SHAPES; do
    T=${shape%:*} B=${shape#*:}
    echo "== torch T $T B $B ($(elapsed))"
    "$PYTHON" scripts/bench_torch_gpt2.py -B "$B" -T "$T" --steps "$STEPS" --warmup 3 > "$LOGS/torch-T$T.log" 2>&1 ||
        { tail -3 "$LOGS/torch-T$T.log"; step_failed "torch T $T"; }
done

echo "== summary ($(elapsed)), logs in $LOGS"
echo "| T | B | train_gpt tokens/s | GiB in use | torch.compile tokens/s | GiB allocated | ratio |"
echo "|---|---|---|---|---|---|---|"
for shape in $SHAPES; do
    T=${shape%:*} B=${shape#*:}
    ours=$(sed -n 's/^done: \([0-9.]*\)K tokens.s.*memory in use \([0-9.]*\) GiB.*/\1 \2/p' "$LOGS/train_gpt-T$T.log")
    theirs=$(sed -n 's/.*: \([0-9.]*\)K tokens.s .*peak allocated \([0-9.]*\) GiB.*/\1 \2/p' "$LOGS/torch-T$T.log")
    set -- ${ours:-? ?} ${theirs:-? ?}
    ratio=$(awk -v a="$1" -v b="$3" 'BEGIN { if (b + 0 > 0) printf "%.3f", a / b; else print "?" }')
    echo "| $T | $B | $1K | $2 | $3K | $4 | $ratio |"
done
gpu_finish
