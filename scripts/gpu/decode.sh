#!/usr/bin/env bash
# Generation on a GPU machine, in one command from the repository root:
#   bash scripts/gpu/decode.sh [BASELINE_DIR]
# builds; runs the decoding tests (tests/unit/layers/test_matmul_rows.cu and
# tests/unit/attention/test_decode.cu, both under compute-sanitizer memcheck too, test_matmul_rows
# under racecheck, tests/programs/test_generation.sh, tests/programs/test_evaluate.sh); trains the
# d12 model of check.sh (L12 C768 NH12, the test text's 8192-token BPE, a context of 16 384, two
# steps) and one of the modern architecture beside it
# (--arch modern, the same shape, data and steps), and times `generate` greedy, 256 new tokens, at
# prompts of 1, ~1000 and ~15 000 tokens and 1, 8 and 32 samples on each (the modern model's
# speed against GPT-2's at the same size), next to PyTorch's decoding loop of GPT-2
# on the same shape (scripts/bench_torch_decode.py: a static KV cache, the step under
# torch.compile's CUDA graphs) where the bar needs it (one sample at every prompt; 8 and 32 at
# prompts of 1 and ~1000); ends with the table and the ratios. Then d48 (GPT-2 1.5B): one
# training step at B 1, T 1024 prints the trainer's memory, and `generate` its own, from that
# checkpoint. With BASELINE_DIR (another flashgpt tree, e.g. an earlier commit) its generate is
# built and timed on the same model and prompts, one sample (a column of its own: the speed
# before). TEST_TEXT: the text; PYTHON: the python with torch. Logs go to $OUT when set, else
# build/decode-logs. Exits non-zero when a step fails, and its last line names the steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 1 "$@"
BASELINE=$(gpu_baseline "${1:-}") || exit 1
LOGS=${OUT:-build/decode-logs}
PYTHON=${PYTHON:-python3}
mkdir -p "$LOGS"

echo "== build ($(elapsed))"
text=${TEST_TEXT:-build/texts/tinyshakespeare.txt}   # the default is unpacked by make
if ! make -j"$(nproc)" all build/tests/unit/layers/test_matmul_rows build/tests/unit/attention/test_decode \
    build/texts/tinyshakespeare.txt > "$LOGS/build.log" 2>&1; then
    tail -30 "$LOGS/build.log"; echo "build failed: see $LOGS/build.log"; exit 1
fi
[ -z "$BASELINE" ] || make -C "$BASELINE" -j"$(nproc)" generate > "$LOGS/build-baseline.log" 2>&1 ||
    step_failed "baseline build"

echo "== tests ($(elapsed))"
for test in layers/test_matmul_rows attention/test_decode; do
    t=$(basename "$test")
    "build/tests/unit/$test" > "$LOGS/$t.log" 2>&1 || step_failed "$t"
    compute-sanitizer --tool memcheck --error-exitcode 99 "build/tests/unit/$test" > "$LOGS/$t-memcheck.log" 2>&1 ||
        step_failed "$t under memcheck"
done
compute-sanitizer --tool racecheck --error-exitcode 99 build/tests/unit/layers/test_matmul_rows \
    > "$LOGS/test_matmul_rows-racecheck.log" 2>&1 ||
    step_failed "test_matmul_rows under racecheck"
for t in test_generation test_evaluate; do
    FLASHGPT_TMP=build/testtmp bash "tests/programs/$t.sh" > "$LOGS/$t.log" 2>&1 || step_failed "$t"
done
grep -hE '^(PASS|FAIL|SKIPPED|    )' "$LOGS"/test_matmul_rows.log "$LOGS"/test_decode.log "$LOGS"/test_generation.log \
    "$LOGS"/test_evaluate.log
grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS"/*-memcheck.log "$LOGS"/*-racecheck.log

echo "== the d12 models, GPT-2's and the modern one ($(elapsed))"
gen=build/gpu-decode
gpu_generation_model "$gen" "$text" "$LOGS" modern

echo "== generate and PyTorch ($(elapsed))"
table="$LOGS/table.md"
echo "| prompt tokens | samples | generate tokens/s | modern generate tokens/s | modern / GPT-2 | PyTorch CUDA graph tokens/s | ratio | baseline, 1 sample |" > "$table"
echo "|---|---|---|---|---|---|---|---|" >> "$table"
for bytes in 0 3500 54000; do   # about 1, 1000 and 15 000 tokens of the BPE
    for samples in 1 8 32; do
        log="$LOGS/generate-$bytes-$samples.log"
        head -c "$bytes" "$text" | ./generate --checkpoint "$gen/run/model_00000002.bin" \
            --tokenizer "$gen/data/tokenizer.bin" --max-tokens 256 --temperature 0 --samples "$samples" - \
            > /dev/null 2> "$log" || { tail -2 "$log"; step_failed "generate $bytes bytes x $samples"; continue; }
        prompt=$(sed -n 's/^prompt: \([0-9]*\) tokens.*/\1/p' "$log")
        ours=$(sed -n 's/.* s: \([0-9.]*\) tokens\/s.*/\1/p' "$log")
        modern_log="$LOGS/generate-modern-$bytes-$samples.log"
        head -c "$bytes" "$text" | ./generate --checkpoint "$gen/run-modern/model_00000002.bin" \
            --tokenizer "$gen/data/tokenizer.bin" --max-tokens 256 --temperature 0 --samples "$samples" - \
            > /dev/null 2> "$modern_log" || { tail -2 "$modern_log"; step_failed "modern generate $bytes bytes x $samples"; }
        modern=$(sed -n 's/.* s: \([0-9.]*\) tokens\/s.*/\1/p' "$modern_log")
        modern_ratio=$(awk -v a="$modern" -v b="$ours" 'BEGIN { if (b + 0 > 0 && a != "") printf "%.2f", a / b; else print "-" }')
        theirs=
        if [ "$samples" = 1 ] || [ "$bytes" != 54000 ]; then
            "$PYTHON" scripts/bench_torch_decode.py --model d12 --vocab 8192 -B "$samples" --prompt "$prompt" \
                --tokens 256 > "$LOGS/torch-$bytes-$samples.log" 2>&1 || step_failed "bench_torch_decode $prompt x $samples"
            theirs=$(awk -F'|' '$2 ~ /d12/ { gsub(/ /, "", $7); print $7 }' "$LOGS/torch-$bytes-$samples.log" | tail -1)
        fi
        ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "-" }')
        before=-
        if [ -n "$BASELINE" ] && [ "$samples" = 1 ]; then
            head -c "$bytes" "$text" | "$BASELINE/generate" --checkpoint "$gen/run/model_00000002.bin" \
                --tokenizer "$gen/data/tokenizer.bin" --max-tokens 256 --temperature 0 - \
                > /dev/null 2> "$LOGS/baseline-$bytes.log" || step_failed "baseline generate $bytes bytes"
            before=$(sed -n 's/.* s: \([0-9.]*\) tokens\/s.*/\1/p' "$LOGS/baseline-$bytes.log")
        fi
        echo "| $prompt | $samples | $ours | ${modern:--} | $modern_ratio | ${theirs:--} | $ratio | ${before:--} |" >> "$table"
    done
done
grep -h '^memory' "$LOGS"/generate-0-1.log "$LOGS"/generate-54000-32.log 2>/dev/null
cat "$table"

echo "== d48 ($(elapsed))"
big=build/gpu-decode-d48
rm -rf "$big"
./train_gpt --model d48 --context 2048 -B 1 -T 1024 --steps 1 --train-data "$gen/data/train_*.bin" --val-every 0 \
    --tokenizer "$gen/data/tokenizer.bin" --out-dir "$big" > "$LOGS/d48-train.log" 2>&1 || step_failed "d48 train_gpt"
grep -A12 '^memory (GiB)' "$LOGS/d48-train.log" | grep -E 'total|^memory'
head -c 3500 "$text" | ./generate --checkpoint "$big/model_00000001.bin" --tokenizer "$gen/data/tokenizer.bin" \
    --max-tokens 64 --temperature 0 - > /dev/null 2> "$LOGS/d48-generate.log" || step_failed "d48 generate"
grep -hE '^memory|tokens/s' "$LOGS/d48-generate.log"
rm -rf "$big"
echo "== done ($(elapsed))"
gpu_finish
