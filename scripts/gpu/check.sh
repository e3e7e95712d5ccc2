#!/usr/bin/env bash
# The project on a GPU machine, in one command from the repository root:
#   bash scripts/gpu/check.sh [BASELINE_DIR]
# builds everything, runs `make test` (every GPU test), then trains d12 (GPT-2 124M) on random
# tokens of GPT-2's vocabulary at T = 1024 (B = 64 and B = 16, GPT-2's recipe and the modern one
# with Muon) and T = 65536 (B = 1) and prints tokens/s and peak memory; then generation: a d12
# with the test text's 8192-token BPE and a context of 16384, two steps trained, generates 256
# greedy tokens after prompts of 1, ~1K and ~14K tokens (tokens/s), and its Hugging Face export
# is checked against train_gpt's loss (scripts/check_export_hf.py).
# With BASELINE_DIR (another flashgpt tree, e.g. an earlier commit) the same run says whether
# this tree computes and runs as that one does: the losses of test_gpt and of test_learning's
# run, line for line and bit for bit; train_gpt's tokens/s, each shape run on this tree, the
# baseline and this tree again (the two runs of this tree tell the noise); the attention
# benchmark's flash rows at HS 64 T 4096 and HS 128 T 16384, and generate's tokens/s, on both.
# PARTS picks the parts, in their order (unset: all): test (make test), losses (with a
# baseline), trainer, attention (with a baseline), generation, export; two calls of a GPU
# machine of at most 10 minutes each can split them. TEST_TEXT: the text file the tests read.
# Logs go to $OUT when set, else build/gpu-logs. Exits non-zero when a step fails, and its last
# line names the steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 1 "$@"
LOGS=${OUT:-build/gpu-logs}
BASELINE=$(gpu_baseline "${1:-}") || exit 1
gpu_parts "test losses trainer attention generation export" test losses trainer attention generation export
JOBS=$(nproc)
mkdir -p "$LOGS"
# tree_test TREE FILE: the path of the test FILE in TREE, found by name under its tests/ so that a
# baseline whose tests/ is laid out otherwise serves as well (a test program is built at build/
# and that path less its .cu).
tree_test() { (cd "$1" && find tests -name "$2" -print -quit); }

echo "== build ($(elapsed))"
[ -z "$BASELINE" ] || (gpt_test=$(tree_test "$BASELINE" test_gpt.cu) && [ -n "$gpt_test" ] &&
                       make -C "$BASELINE" -j"$JOBS" all "build/${gpt_test%.cu}" build/bench/bench_attention \
                           > "$LOGS/build-baseline.log" 2>&1 && echo "baseline built") &
baseline_pid=$!
if ! make -j"$JOBS" all build/tests/unit/attention/test_attention build/bench/bench_attention \
    > "$LOGS/build.log" 2>&1; then
    tail -30 "$LOGS/build.log"; echo "build failed: see $LOGS/build.log"; exit 1
fi
wait "$baseline_pid" || step_failed "baseline build"

if part test; then
echo "== make test ($(elapsed))"
make -j"$JOBS" test ${TEST_TEXT:+TEST_TEXT="$TEST_TEXT"} > "$LOGS/test.log" 2>&1 || step_failed "make test"
grep -E '^(FAIL|    also)' "$LOGS/test.log" | head -40
tail -1 "$LOGS/test.log"
fi

text=${TEST_TEXT:-build/texts/tinyshakespeare.txt}
text_path=$(realpath "$text")
if [ -n "$BASELINE" ] && part losses; then
    echo "== the same losses as the baseline ($(elapsed))"
    # test_gpt and test_learning's run of each tree in its own folder (they run its ./train_gpt),
    # test_gpt on this tree's references.
    here=$(pwd -P)
    [ -d build/testdata ] || for gen in tests/reference/gen_*.py; do python3 "$gen" build/testdata > /dev/null; done
    for tree in this baseline; do
        root=.; [ "$tree" = baseline ] && root=$BASELINE
        gpt_test=$(tree_test "$root" test_gpt.cu)
        (cd "$root" && FLASHGPT_TESTDATA="$here/build/testdata" FLASHGPT_TMP="$(pwd -P)/build/check-tmp" \
            FLASHGPT_TEXT="$text_path" "build/${gpt_test%.cu}") > "$LOGS/test_gpt-$tree.log" 2>&1
    done
    losses() { grep -E 'loss|PASS|FAIL' "$1" | sed 's/[0-9.]* ms//g'; }
    if diff <(losses "$LOGS/test_gpt-baseline.log") <(losses "$LOGS/test_gpt-this.log") > "$LOGS/test_gpt.diff"; then
        echo "test_gpt: the same $(losses "$LOGS/test_gpt-this.log" | wc -l) lines of losses and verdicts"
    else
        echo "test_gpt: the lines differ ($LOGS/test_gpt.diff):"; head -8 "$LOGS/test_gpt.diff"
    fi
    for tree in this baseline; do
        root=.; [ "$tree" = baseline ] && root=$BASELINE
        (cd "$root" && FLASHGPT_TMP="$(pwd -P)/build/check-learning" FLASHGPT_TEXT="$text_path" \
            bash "$(tree_test . test_learning.sh)") > "$LOGS/learning-$tree.log" 2>&1
        cut -d, -f1-5 "$root/build/check-learning/learning/log.csv" > "$LOGS/learning-$tree.csv" 2>/dev/null
    done
    if [ -s "$LOGS/learning-this.csv" ] && cmp -s "$LOGS/learning-this.csv" "$LOGS/learning-baseline.csv"; then
        echo "test_learning: the same steps, losses, learning rates and norms, bit for bit ($(wc -l < "$LOGS/learning-this.csv") lines)"
    else
        echo "test_learning: the logs differ"; step_failed "the baseline's losses"
        diff "$LOGS/learning-baseline.csv" "$LOGS/learning-this.csv" | head -6
    fi
fi

if part trainer; then
echo "== d12 trainer ($(elapsed))"
shard_dir=build/gpu-check-data
mkdir -p "$shard_dir"
python3 scripts/random_tokens.py "$shard_dir/synth_000000.bin" $((2 * 65536 * 2 + 1)) || step_failed "random tokens"
bench() {  # bench <label> <train_gpt> <recipe> <T> <B> <steps> [options]
    local label=$1 program=$2 recipe=$3 T=$4 B=$5 steps=$6 log="$LOGS/trainer-$1-$3-T$4-B$5.log"
    shift 6
    "$program" --model d12 --context "$T" -T "$T" -B "$B" --steps "$steps" --train-data "$shard_dir/synth_*.bin" \
        --val-data '' "$@" > "$log" 2>&1 ||
        { echo "$label $recipe T $T B $B: failed"; tail -3 "$log"; step_failed "trainer $label $recipe T $T B $B"; return; }
    sed -n "s/^done: \([0-9.]*K\) tokens.s.*memory in use \([0-9.]*\) GiB/| $label | $recipe | $T | $B | \1 | \2 |/p" "$log"
}
echo "| train_gpt | recipe | T | B | tokens/s | peak GiB |"
echo "|---|---|---|---|---|---|"
modern="--arch modern --optimizer muon"
for run in "gpt2 1024 64 10" "modern 1024 64 10" "gpt2 1024 16 30" "modern 1024 16 30" "gpt2 65536 1 6"; do
    set -- $run
    options=; [ "$1" = modern ] && options=$modern
    bench this ./train_gpt "$@" $options
    [ -z "$BASELINE" ] || bench baseline "$BASELINE/train_gpt" "$@" $options
    bench this-again ./train_gpt "$@" $options
done
fi
if [ -n "$BASELINE" ] && part attention; then
    echo "== attention against the baseline ($(elapsed))"
    for shape in "64 4096" "128 16384"; do
        for tree in this baseline this-again; do
            root=.; [ "$tree" = baseline ] && root=$BASELINE
            "$root/build/bench/bench_attention" $shape flash 2>&1 | sed -n "s/^/$tree: /p" | head -3
        done
    done
fi
gen=build/gpu-check-generate
if part generation || part export; then gpu_generation_model "$gen" "$text" "$LOGS"; fi
if part generation; then
echo "== generation ($(elapsed))"
echo "| generate | prompt bytes | prompt tokens | prompt ms | generated | tokens/s |"
echo "|---|---|---|---|---|---|"
for bytes in 0 4000 50000; do
    for tree in this ${BASELINE:+baseline this-again}; do
        program=./generate; [ "$tree" = baseline ] && program=$BASELINE/generate
        head -c "$bytes" "$text" | "$program" --checkpoint "$gen/run/model_00000002.bin" --tokenizer "$gen/data/tokenizer.bin" \
            --max-tokens 256 --temperature 0 - > "$LOGS/generate-$tree-$bytes.out" 2> "$LOGS/generate-$tree-$bytes.log" ||
            { tail -2 "$LOGS/generate-$tree-$bytes.log"; step_failed "generate ($tree) after $bytes bytes"; continue; }
        sed -n "s/^prompt: \([0-9]*\) tokens in \([0-9.]*\) ms; generated \([0-9]*\) tokens x 1 samples in [0-9.]* s: \([0-9.]*\) tokens.s.*/| $tree | $bytes | \1 | \2 | \3 | \4 |/p" \
            "$LOGS/generate-$tree-$bytes.log"
    done
done
fi
if part export; then
echo "== Hugging Face export ($(elapsed))"
python3 scripts/check_export_hf.py --train-gpt ./train_gpt "$gen/run/model_00000002.bin" "$gen/data/val_000000.bin" 4 256 \
    > "$LOGS/check-export.log" 2>&1 || step_failed "Hugging Face export"
tail -4 "$LOGS/check-export.log"
fi
echo "== done ($(elapsed))"
gpu_finish
