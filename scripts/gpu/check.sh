#!/usr/bin/env bash
# The project on a GPU machine, in one command from the repository root:
#   bash scripts/gpu/check.sh [BASELINE_DIR]
# builds everything, runs `make test` (every GPU test), then trains d12 (GPT-2 124M) on random
# tokens of GPT-2's vocabulary at T = 1024 (B = 64) and T = 65536 (B = 1) and prints tokens/s
# and peak memory; then generation: a d12 with the test text's 8192-token BPE and a context of
# 16384, two steps trained, generates 256 greedy tokens after prompts of 1, ~1K and ~14K tokens
# (tokens/s), and its Hugging Face export is checked against train_gpt's loss
# (scripts/check_export_hf.py). With BASELINE_DIR (another flashgpt tree, e.g. an earlier commit), its
# train_gpt is built and timed the same way, alternating with this one, for a same-run
# comparison. TEST_TEXT: the text file the tests read. Logs go to $OUT when set, else
# build/gpu-logs. Exits non-zero when a step fails, and its last line names the steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 1 "$@"
LOGS=${OUT:-build/gpu-logs}
BASELINE=$(gpu_baseline "${1:-}") || exit 1
JOBS=$(nproc)
mkdir -p "$LOGS"

echo "== build ($(elapsed))"
[ -z "$BASELINE" ] || (make -C "$BASELINE" -j"$JOBS" train_gpt > "$LOGS/build-baseline.log" 2>&1 &&
                       echo "baseline built") &
baseline_pid=$!
if ! make -j"$JOBS" all build/tests/test_attention > "$LOGS/build.log" 2>&1; then
    tail -30 "$LOGS/build.log"; echo "build failed: see $LOGS/build.log"; exit 1
fi
wait "$baseline_pid" || step_failed "baseline build"

echo "== make test ($(elapsed))"
make -j"$JOBS" test ${TEST_TEXT:+TEST_TEXT="$TEST_TEXT"} > "$LOGS/test.log" 2>&1 || step_failed "make test"
grep -E '^(FAIL|    also)' "$LOGS/test.log" | head -40
tail -1 "$LOGS/test.log"

echo "== d12 trainer ($(elapsed))"
shard_dir=build/gpu-check-data
mkdir -p "$shard_dir"
python3 scripts/random_tokens.py "$shard_dir/synth_000000.bin" $((2 * 65536 * 2 + 1)) || step_failed "random tokens"
bench() {  # bench <label> <train_gpt> <T> <B> <steps>
    local log="$LOGS/trainer-$1-T$3.log"
    "$2" --model d12 --context "$3" -T "$3" -B "$4" --steps "$5" --train-data "$shard_dir/synth_*.bin" \
        --val-data '' > "$log" 2>&1 || { echo "$1 T $3: failed"; tail -3 "$log"; step_failed "trainer $1 T $3"; return; }
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
echo "== generation ($(elapsed))"
text=${TEST_TEXT:-build/texts/tinyshakespeare.txt}
gen=build/gpu-check-generate
gpu_generation_model "$gen" "$text" "$LOGS"
echo "| prompt bytes | prompt tokens | prompt ms | generated | tokens/s |"
echo "|---|---|---|---|---|"
for bytes in 0 4000 50000; do
    head -c "$bytes" "$text" | ./generate --checkpoint "$gen/run/model_00000002.bin" --tokenizer "$gen/data/tokenizer.bin" \
        --max-tokens 256 --temperature 0 - > "$LOGS/generate-$bytes.out" 2> "$LOGS/generate-$bytes.log" ||
        { tail -2 "$LOGS/generate-$bytes.log"; step_failed "generate after $bytes bytes"; continue; }
    sed -n "s/^prompt: \([0-9]*\) tokens in \([0-9.]*\) ms; generated \([0-9]*\) tokens x 1 samples in [0-9.]* s: \([0-9.]*\) tokens.s.*/| $bytes | \1 | \2 | \3 | \4 |/p" \
        "$LOGS/generate-$bytes.log"
done
echo "== Hugging Face export ($(elapsed))"
python3 scripts/check_export_hf.py --train-gpt ./train_gpt "$gen/run/model_00000002.bin" "$gen/data/val_000000.bin" 4 256 \
    > "$LOGS/check-export.log" 2>&1 || step_failed "Hugging Face export"
tail -4 "$LOGS/check-export.log"
echo "== done ($(elapsed))"
gpu_finish
