#!/usr/bin/env bash
# The project on a GPU machine, in one command from the repository root:
#   bash scripts/gpu_check.sh [BASELINE_DIR]
# builds everything, runs `make test` (every GPU test), then trains d12 (GPT-2 124M) on random
# tokens of GPT-2's vocabulary at T = 1024 (B = 64) and T = 65536 (B = 1) and prints tokens/s
# and peak memory. With BASELINE_DIR (another flashgpt tree, e.g. an earlier commit), its
# train_gpt is built and timed the same way, alternating with this one, for a same-run
# comparison. TEST_TEXT: the text file the tests read. Logs go to $OUT when set, else
# build/gpu-logs.
set -u
LOGS=${OUT:-build/gpu-logs}
BASELINE=${1:-}
JOBS=$(nproc)
mkdir -p "$LOGS"
start=$(date +%s)
elapsed() { echo "$(( $(date +%s) - start )) s"; }

echo "== build ($(elapsed))"
[ -z "$BASELINE" ] || (make -C "$BASELINE" -j"$JOBS" train_gpt > "$LOGS/build-baseline.log" 2>&1 &&
                       echo "baseline built") &
if ! make -j"$JOBS" all build/tests/test_attention > "$LOGS/build.log" 2>&1; then
    tail -30 "$LOGS/build.log"; echo "build failed: see $LOGS/build.log"; exit 1
fi
wait

echo "== make test ($(elapsed))"
make -j"$JOBS" test ${TEST_TEXT:+TEST_TEXT="$TEST_TEXT"} > "$LOGS/test.log" 2>&1
grep -E '^(FAIL|    also)' "$LOGS/test.log" | head -40
tail -1 "$LOGS/test.log"

echo "== d12 trainer ($(elapsed))"
shard_dir=build/gpu-check-data
mkdir -p "$shard_dir"
python3 - "$shard_dir/synth_000000.bin" $((2 * 65536 * 2 + 1)) <<'EOF'
import os, sys
from array import array
path, n, vocab = sys.argv[1], int(sys.argv[2]), 50257
tokens = array("H", (t % vocab for t in array("H", os.urandom(2 * n))))
header = array("i", [20240520, 1, n, vocab] + [0] * 252)
with open(path, "wb") as f:
    f.write(header.tobytes())
    f.write(tokens.tobytes())
EOF
bench() {  # bench <label> <train_gpt> <T> <B> <steps>
    local log="$LOGS/trainer-$1-T$3.log"
    "$2" --model d12 --context "$3" -T "$3" -B "$4" --steps "$5" --train-data "$shard_dir/synth_*.bin" \
        --val-data '' > "$log" 2>&1 || { echo "$1 T $3: failed"; tail -3 "$log"; return; }
    sed -n "s/^done: \([0-9.]*K\) tokens.s.*memory in use \([0-9.]*\) GiB/| $1 | $3 | $4 | \1 | \2 |/p" "$log"
}
echo "| train_gpt | T | B | tokens/s | peak GiB |"
echo "|---|---|---|---|---|"
for T_B_S in "1024 64 10" "65536 1 6"; do
    set -- $T_B_S
    bench this ./train_gpt "$1" "$2" "$3"
    [ -z "$BASELINE" ] || bench baseline "$BASELINE/train_gpt" "$1" "$2" "$3"
    bench this-again ./train_gpt "$1" "$2" "$3"
done
echo "== done ($(elapsed))"
