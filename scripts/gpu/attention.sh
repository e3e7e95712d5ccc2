#!/usr/bin/env bash
# Everything about attention on a GPU machine, in one command from the repository root:
#   bash scripts/gpu/attention.sh [BASELINE_DIR]
# builds the attention test and benchmark; runs the test while compute-sanitizer memcheck and
# racecheck check it on the small shapes (FLASHGPT_ATTN_SMALL=1) next to it; runs the benchmark
# and PyTorch SDPA (scripts/bench_torch_attention.py HS T) shape by shape, each shape's rows of
# both back to back, so that both see the GPU in the same state (its clock falls under the power
# cap as a long run goes on); then the masked shapes (T 16384 and 65536, documents of 1024 tokens
# and a window of 1024 keys, HS 64 and 128) against PyTorch's FlexAttention with the same block
# mask (scripts/bench_torch_attention.py HS T MASK), each shape's rows back to back too; ends with
# a summary, the masked shapes' TFLOP/s (counted over the pairs the mask leaves visible) beside
# flashgpt's own dense causal figure at T = 1024 and FlexAttention's. With BASELINE_DIR (another
# flashgpt tree, e.g. an earlier commit) its benchmark is built too and runs beside this one's,
# shape by shape, and the summary gives this tree's flash speed over the baseline's.
# Logs go to $OUT when set, else build/attention-logs. About 7 minutes on an H200. Exits non-zero
# when a step fails (a sanitizer that times out is reported, not failed), and its last line names
# the steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 1 "$@"
BASELINE=$(gpu_baseline "${1:-}") || exit 1
LOGS=${OUT:-build/attention-logs}
PYTHON=${PYTHON:-python3}
SANITIZER_LIMIT_S=${SANITIZER_LIMIT_S:-100}
mkdir -p "$LOGS"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

echo "== build ($(elapsed))"
baseline_pid=
if [ -n "$BASELINE" ]; then
    make -C "$BASELINE" -j16 build/bench/bench_attention > "$LOGS/build-baseline.log" 2>&1 &
    baseline_pid=$!
fi
if ! make -j16 build/tests/unit/attention/test_attention build/bench/bench_attention > "$LOGS/build.log" 2>&1; then
    tail -30 "$LOGS/build.log"
    echo "build failed: see $LOGS/build.log"
    exit 1
fi
if [ -n "$BASELINE" ] && ! wait "$baseline_pid"; then
    tail -30 "$LOGS/build-baseline.log"
    echo "baseline build failed: see $LOGS/build-baseline.log"
    exit 1
fi

# The sanitizers run on the small shapes in the background while the full test runs.
sanitize() {  # sanitize <tool>: fails on the tool's errors, the test's failures, no tool
    if [ ! -x "$sanitizer" ]; then echo "compute-sanitizer not found" > "$LOGS/$1.log"; return 1; fi
    FLASHGPT_ATTN_SMALL=1 timeout "$SANITIZER_LIMIT_S" "$sanitizer" --tool "$1" --error-exitcode 99 \
        --print-limit 20 build/tests/unit/attention/test_attention > "$LOGS/$1.log" 2>&1
    local status=$?
    echo "exit status $status" >> "$LOGS/$1.log"
    [ "$status" -eq 0 ] || [ "$status" -eq 124 ]
}
echo "== test_attention, memcheck and racecheck on the small shapes ($(elapsed))"
sanitize memcheck &
memcheck_pid=$!
sanitize racecheck &
racecheck_pid=$!
build/tests/unit/attention/test_attention > "$LOGS/test_attention.log" 2>&1
test_status=$?
grep -E '^(FAIL|    also)' "$LOGS/test_attention.log" | head -40
wait "$memcheck_pid" || step_failed memcheck
wait "$racecheck_pid" || step_failed racecheck

echo "== bench_attention and PyTorch's SDPA, shape by shape ($(elapsed))"
: > "$LOGS/bench_attention.log"
: > "$LOGS/torch.log"
: > "$LOGS/bench_baseline.log"
bench_status=0 torch_status=0 baseline_status=0
for hs in 64 128; do
    for T in 512 1024 2048 4096 8192 16384 32768; do   # both benchmarks' SEQ_LENS
        build/bench/bench_attention "$hs" "$T" >> "$LOGS/bench_attention.log" 2>&1 || bench_status=$?
        if [ -n "$BASELINE" ]; then
            "$BASELINE/build/bench/bench_attention" "$hs" "$T" >> "$LOGS/bench_baseline.log" 2>&1 || baseline_status=$?
        fi
        "$PYTHON" scripts/bench_torch_attention.py "$hs" "$T" >> "$LOGS/torch.log" 2>&1 || torch_status=$?
    done
done
grep -E '^\| [0-9]' "$LOGS/bench_attention.log" "$LOGS/torch.log" | sed 's/^[^:]*://'

echo "== the masked shapes: bench_attention and PyTorch's FlexAttention, shape by shape ($(elapsed))"
: > "$LOGS/bench_masked.log"
: > "$LOGS/torch_masked.log"
masked_status=0 torch_masked_status=0
for hs in 64 128; do
    for T in 16384 65536; do   # bench_attention's MASKED_SEQ_LENS and MASKS
        for mask in docs=1024 window=1024; do
            for impl in flash flash-mma; do
                build/bench/bench_attention "$hs" "$T" "$impl" "$mask" >> "$LOGS/bench_masked.log" 2>&1 || masked_status=$?
            done
            "$PYTHON" scripts/bench_torch_attention.py "$hs" "$T" "$mask" >> "$LOGS/torch_masked.log" 2>&1 ||
                torch_masked_status=$?
        done
    done
done
grep -E '^\| [0-9]' "$LOGS/bench_masked.log" "$LOGS/torch_masked.log" | sed 's/^[^:]*://'

# ---- summary
count() { grep -c "^$1 " "$2"; }
sanitizer_result() {  # <log>: the tool's summary line, or why there is none
    local line
    line=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$1" | tail -1 | sed 's/^=* *//')
    if grep -q '^exit status 124' "$1"; then line="timed out after ${SANITIZER_LIMIT_S} s; $line"; fi
    echo "${line:-$(tail -1 "$1")}; $(count PASS "$1") passed, $(count FAIL "$1") failed"
}
echo
echo "== summary ($(elapsed)), logs in $LOGS"
echo "| step | result |"
echo "|---|---|"
echo "| test_attention | $(count PASS "$LOGS/test_attention.log") passed, $(count FAIL "$LOGS/test_attention.log") failed, $(count SKIPPED "$LOGS/test_attention.log") skipped (exit status $test_status) |"
echo "| memcheck (small shapes) | $(sanitizer_result "$LOGS/memcheck.log") |"
echo "| racecheck (small shapes) | $(sanitizer_result "$LOGS/racecheck.log") |"
echo "| bench_attention | exit status $bench_status |"
echo "| bench_torch_attention.py | exit status $torch_status |"
echo "| bench_attention, masked | exit status $masked_status |"
echo "| bench_torch_attention.py, masked | exit status $torch_masked_status |"
echo
# TFLOP/s side by side: the rows of both Markdown tables, keyed by head size and T.
echo "| HS | T | flash fwd / bwd / bwd det | naive fwd / bwd | memory flash / naive GiB | torch FA2 fwd / bwd | cuDNN fwd / bwd |"
echo "|---|---|---|---|---|---|---|"
awk -F'|' '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    FILENAME ~ /bench_attention/ && $2 ~ /^ *[0-9]+ *$/ {
        key = trim($2) " | " trim($3)
        if (!(key in seen)) { seen[key] = 1; order[n++] = key }
        impl = trim($5)
        if (impl == "flash") { flash[key] = trim($7) " / " trim($9) " / " trim($11); fmem[key] = trim($12) }
        else if (impl == "naive") { naive[key] = ($6 ~ /OOM/ ? "OOM" : trim($7) " / " trim($9)); nmem[key] = trim($12) }
    }
    FILENAME ~ /\/torch\.log$/ && $2 ~ /^ *[0-9]+ *$/ {
        key = trim($2) " | " trim($3)
        if (!(key in seen)) { seen[key] = 1; order[n++] = key }
        torch[key, trim($5)] = ($6 ~ /failed/ ? "failed" : trim($7) " / " trim($9))
    }
    END {
        for (i = 0; i < n; i++) {
            k = order[i]
            printf "| %s | %s | %s | %s / %s | %s | %s |\n", k, flash[k], naive[k], fmem[k], nmem[k],
                   torch[k, "flash"], torch[k, "cudnn"]
        }
    }' "$LOGS/bench_attention.log" "$LOGS/torch.log"
# The masked shapes: flash TFLOP/s over the visible pairs, its ratio to the dense causal flash
# figure at T = 1024 of the same head size, FlexAttention's, and flash over Flex.
echo
echo "| HS | T | mask | flash fwd / bwd / bwd det | over dense T=1024 fwd / bwd | flash-mma fwd / bwd | Flex fwd / bwd | flash over Flex fwd / bwd |"
echo "|---|---|---|---|---|---|---|---|"
awk -F'|' '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    function ratio(x, y) { return (x + 0 > 0 && y + 0 > 0) ? sprintf("%.2f", x / y) : "-" }
    $2 !~ /^ *[0-9]+ *$/ { next }
    FILENAME ~ /bench_attention/ && trim($5) == "flash" && trim($3) == "1024" { dense_f[trim($2)] = $7; dense_b[trim($2)] = $9 }
    FILENAME ~ /bench_masked|torch_masked/ {
        impl = trim($5); mask = impl; sub(/^[^,]*, /, "", mask); sub(/,.*$/, "", impl)
        key = trim($2) " | " trim($3) " | " mask
        if (!(key in seen)) { seen[key] = 1; order[n++] = key; hs[key] = trim($2) }
        if ($6 ~ /failed|OOM|unsupported/) { f[key, impl] = "-"; b[key, impl] = "-"; next }
        f[key, impl] = trim($7); b[key, impl] = trim($9); d[key, impl] = trim($11)
    }
    END {
        for (i = 0; i < n; i++) {
            k = order[i]
            printf "| %s | %s / %s / %s | %s / %s | %s / %s | %s / %s | %s / %s |\n", k,
                   f[k, "flash"], b[k, "flash"], d[k, "flash"],
                   ratio(f[k, "flash"], dense_f[hs[k]]), ratio(b[k, "flash"], dense_b[hs[k]]),
                   f[k, "flash-mma"], b[k, "flash-mma"], f[k, "flex"], b[k, "flex"],
                   ratio(f[k, "flash"], f[k, "flex"]), ratio(b[k, "flash"], b[k, "flex"])
        }
    }' "$LOGS/bench_attention.log" "$LOGS/bench_masked.log" "$LOGS/torch_masked.log"
if [ -n "$BASELINE" ]; then
    # This tree's flash TFLOP/s over the baseline's, per shape and pass.
    echo
    echo "| HS | T | flash fwd / bwd / bwd det: this tree over $BASELINE |"
    echo "|---|---|---|"
    awk -F'|' '
        function trim(s) { gsub(/^ +| +$/, "", s); return s }
        $2 ~ /^ *[0-9]+ *$/ && trim($5) == "flash" {
            key = trim($2) " | " trim($3)
            if (FILENAME ~ /baseline/) { b7[key] = $7; b9[key] = $9; b11[key] = $11 }
            else { order[n++] = key; t7[key] = $7; t9[key] = $9; t11[key] = $11 }
        }
        function ratio(x, y) { return (y + 0 > 0) ? sprintf("%.3f", x / y) : "-" }
        END {
            for (i = 0; i < n; i++) {
                k = order[i]
                printf "| %s | %s / %s / %s |\n", k, ratio(t7[k], b7[k]), ratio(t9[k], b9[k]), ratio(t11[k], b11[k])
            }
        }' "$LOGS/bench_attention.log" "$LOGS/bench_baseline.log"
    [ "$baseline_status" -eq 0 ] || step_failed "bench_attention (baseline)"
fi
[ "$test_status" -eq 0 ] || step_failed test_attention
[ "$bench_status" -eq 0 ] || step_failed bench_attention
[ "$torch_status" -eq 0 ] || step_failed bench_torch_attention.py
[ "$masked_status" -eq 0 ] || step_failed "bench_attention (masked)"
[ "$torch_masked_status" -eq 0 ] || step_failed "bench_torch_attention.py (masked)"
gpu_finish
