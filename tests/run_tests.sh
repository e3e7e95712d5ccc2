#!/usr/bin/env bash
# Runs the reference generators (tests/reference/gen_*.py), every test program given as an
# argument, then the shell and Python tests of every folder of tests/ (tests/*/test_*.sh,
# tests/*/test_*.py), and counts the PASS / FAIL / SKIPPED lines they print.
# A program that dies without printing a FAIL line counts as one failure.
# The last line is "N passed, N failed, N skipped".
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
export FLASHGPT_TESTDATA="$BUILD/testdata"
export FLASHGPT_TMP="$BUILD/testtmp"
export FLASHGPT_TEXT="${TEXT:-$BUILD/texts/tinyshakespeare.txt}"
export PYTHON
rm -rf "$FLASHGPT_TMP"
mkdir -p "$FLASHGPT_TESTDATA" "$FLASHGPT_TMP"

passed=0; failed=0; skipped=0
count() {  # count <log>: adds its lines to the totals, sets f to its FAIL count
    local p s
    p=$(grep -c '^PASS ' "$1"); f=$(grep -c '^FAIL ' "$1"); s=$(grep -c '^SKIPPED ' "$1")
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

# Without numpy the generators and Python tests cannot run; without nvcc the GPU tests were not
# built (UNBUILT_GPU_TESTS names them): each says SKIPPED, never a silent pass.
have_numpy=yes
"$PYTHON" -c 'import numpy' 2>/dev/null || have_numpy=
for t in ${UNBUILT_GPU_TESTS:-}; do
    echo "SKIPPED $t (nvcc not found)"
    skipped=$((skipped + 1))
done

for gen in tests/reference/gen_*.py; do
    [ -e "$gen" ] || continue
    echo "== $gen"
    if [ -z "$have_numpy" ]; then
        echo "SKIPPED $gen (no numpy for $PYTHON)"
        skipped=$((skipped + 1))
        continue
    fi
    if ! "$PYTHON" "$gen" "$FLASHGPT_TESTDATA"; then
        echo "FAIL $gen: reference generator failed"
        failed=$((failed + 1))
    fi
done

# Test programs: the built binaries given as arguments, the shell tests, then the Python tests
# (numpy only).
for t in "$@" tests/*/test_*.sh tests/*/test_*.py; do
    [ -e "$t" ] || continue
    echo "== $t"
    log="$FLASHGPT_TMP/$(basename "$t").log"
    if [ -z "$have_numpy" ] && [ "${t%.py}" != "$t" ]; then
        echo "SKIPPED $t (no numpy for $PYTHON)"
        skipped=$((skipped + 1))
        continue
    fi
    case "$t" in
        *.py) "$PYTHON" "$t" 2>&1 | tee "$log" ;;
        *.sh) bash "$t" 2>&1 | tee "$log" ;;
        *) "$t" 2>&1 | tee "$log" ;;
    esac
    status=${PIPESTATUS[0]}
    count "$log"
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $t: exited with status $status"
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
