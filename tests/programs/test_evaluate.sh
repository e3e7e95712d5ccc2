#!/usr/bin/env bash
# tests/programs/test_evaluate.sh: ./evaluate, the multiple-choice accuracy of a checkpoint, on
# tests/data/hellaswag_tiny.jsonl (items 0-15 are the true next line of tinyshakespeare against
# three endings of random letters; items 16-23 four real lines, none the continuation).
# Without a GPU: the checks before the GPU (a malformed item line, a missing items file, --scores
# in a missing folder or naming an input, and a valid run that gets as far as looking for a
# device), on a model of zeros written here; and tests/reference/evaluate_reference.py on that model. With
# a CUDA device: a d6 trained here for 200 steps prefers the real lines, batching leaves the
# scores as they are, and the scores match the float64 reference. Needs ./evaluate, ./prepare_data and the text
# ($FLASHGPT_TEXT); the reference needs numpy ($PYTHON, else .venv/bin/python3). Prints PASS /
# FAIL / SKIPPED lines like tests/lib/test.h.
set -u
cd "$(dirname "$0")/../.."
if [ ! -x ./evaluate ]; then
    echo "SKIPPED evaluate (./evaluate is not built: no nvcc)"
    exit 0
fi
text=${FLASHGPT_TEXT:-build/texts/tinyshakespeare.txt}
if [ ! -f "$text" ]; then
    echo "SKIPPED evaluate (no TEST_TEXT: $text)"
    exit 0
fi
tmp=${FLASHGPT_TMP:-/tmp}/evaluate
rm -rf "$tmp"
mkdir -p "$tmp"
. tests/lib/cases.sh
PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import numpy' 2>/dev/null || PYTHON=.venv/bin/python3
numpy=yes
"$PYTHON" -c 'import numpy' 2>/dev/null || numpy=
items=tests/data/hellaswag_tiny.jsonl
# The output is one line, the error given.
says() { [ "$(wc -l < "$1")" = 1 ] && grep -q -- "^error: $2" "$1"; }
last() { tail -1 "$1"; }

# The BPE of tests/programs/test_learning.sh (4096 ids), which the GPU cases also train on.
if ! ./prepare_data --out-dir "$tmp/data" --vocab-size 4096 --split-blank-lines "$text" > "$tmp/prepare.out" 2>&1; then
    echo "FAIL evaluate: prepare_data: $(last "$tmp/prepare.out")"
    exit 1
fi
tok=$tmp/data/tokenizer.bin
# A model of zeros (gpt/checkpoint.h's version 5, bf16) of the tokenizer's 4096 ids: it passes
# every check before the GPU, and its every prediction is uniform, ln(4096) per token.
python3 - "$tmp/zero.bin" <<'EOF'
import struct, sys
maxT, V, L, NH, C = 128, 4096, 1, 2, 128
Vp = (V + 127) // 128 * 128
P = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240326, 5, maxT, V, L, NH, C, Vp, *[0] * 248))
    f.write(bytes(2 * P))
EOF
zero=(--checkpoint "$tmp/zero.bin" --tokenizer "$tok")

# Each of these stops before the GPU: with the devices hidden, a machine that has one does too.
begin "evaluate_names_the_malformed_line"
awk 'NR == 5 { sub(/, "[^"]*"\]/, "]") } { print }' "$items" > "$tmp/bad.jsonl"  # 3 endings
CUDA_VISIBLE_DEVICES= ./evaluate "${zero[@]}" --hellaswag "$tmp/bad.jsonl" > "$tmp/out" 2>&1
check "exit status 0" test $? -ne 0
check "not one line naming $tmp/bad.jsonl:5: $(last "$tmp/out")" says "$tmp/out" "--hellaswag $tmp/bad.jsonl:5: "
end

begin "evaluate_names_a_missing_items_file"
CUDA_VISIBLE_DEVICES= ./evaluate "${zero[@]}" --hellaswag "$tmp/missing.jsonl" > "$tmp/out" 2>&1
check "exit status 0" test $? -ne 0
check "not one line naming the file: $(last "$tmp/out")" says "$tmp/out" "--hellaswag $tmp/missing.jsonl: "
end

begin "evaluate_refuses_scores_in_a_missing_folder"
CUDA_VISIBLE_DEVICES= ./evaluate "${zero[@]}" --hellaswag "$items" --scores "$tmp/no_folder/scores.csv" > "$tmp/out" 2>&1
check "exit status 0" test $? -ne 0
check "not one line naming --scores: $(last "$tmp/out")" says "$tmp/out" "--scores $tmp/no_folder/scores.csv: "
check "the folder was made" test ! -e "$tmp/no_folder"
end

# --scores is renamed over its path once the GPU has scored the items: an input there (also
# through a link) is refused before the GPU, and left as it was.
begin "evaluate_scores_is_never_an_input"
cp "$items" "$tmp/items.jsonl"
ln -f "$tok" "$tmp/tokenizer_hard_link.bin"
sums_before=$(cksum "$tmp/zero.bin" "$tok" "$tmp/items.jsonl")
while IFS='|' read -r scores flag input; do
    CUDA_VISIBLE_DEVICES= ./evaluate "${zero[@]}" --hellaswag "$tmp/items.jsonl" --scores "$scores" > "$tmp/out" 2>&1
    check "exit status 0" test $? -ne 0
    check "--scores $scores: $(last "$tmp/out")" says "$tmp/out" "--scores $scores: is the input $flag $input (not overwritten)"
done <<EOF
$tmp/zero.bin|--checkpoint|$tmp/zero.bin
$tok|--tokenizer|$tok
$tmp/tokenizer_hard_link.bin|--tokenizer|$tok
$tmp/items.jsonl|--hellaswag|$tmp/items.jsonl
EOF
check "an input changed" test "$(cksum "$tmp/zero.bin" "$tok" "$tmp/items.jsonl")" = "$sums_before"
end

# The only error left for a valid run without a device is the device: every earlier check passed.
begin "evaluate_checks_everything_before_the_gpu"
CUDA_VISIBLE_DEVICES= ./evaluate "${zero[@]}" --hellaswag "$items" --scores "$tmp/zero.csv" > "$tmp/out" 2>&1
check "exit status 0" test $? -ne 0
check "not one line saying no CUDA device: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
check "--scores written without scores" test ! -e "$tmp/zero.csv"
end

# The reference on the model of zeros, whose every token costs ln(4096): rows of those losses
# pass, a row 20% off fails, naming it; a model of the modern architecture is refused.
if [ -n "$numpy" ]; then
    begin "evaluate_reference_checks_every_row"
    awk 'BEGIN { l = log(4096); print "item,line,label,ending,tokens,sum_loss,mean_loss,ids"
        for (i = 0; i < 2; i++) for (k = 0; k < 4; k++)
            printf "%d,%d,0,%d,%d,%.9g,%.9g,4095 %d 17 300 4001 9\n", i, i + 1, k, k + 1, (k + 1) * l, l, k }' > "$tmp/right.csv"
    "$PYTHON" tests/reference/evaluate_reference.py "$tmp/zero.bin" "$tmp/right.csv" > "$tmp/out" 2>&1
    st=$?
    check "right rows refused: $(head -1 "$tmp/out")" test $st -eq 0
    awk -F, 'BEGIN { OFS = "," } NR == 4 { $6 *= 1.2 } { print }' "$tmp/right.csv" > "$tmp/wrong.csv"
    "$PYTHON" tests/reference/evaluate_reference.py "$tmp/zero.bin" "$tmp/wrong.csv" > "$tmp/out" 2>&1
    check "a row 20% off passed" test $? -ne 0
    check "the row is not named: $(head -1 "$tmp/out")" has "$tmp/out" "^item 0 ending 2: sum_loss"
    # A model of the modern architecture (train_gpt's initial one, written on the host): refused,
    # not read as GPT-2's.
    ./train_gpt --train-data "$tmp/data/train_*.bin" --model d2 --context 128 -T 128 --arch modern \
        --save-init "$tmp/modern.bin" > "$tmp/out" 2>&1
    check "train_gpt --save-init --arch modern: $(last "$tmp/out")" test -f "$tmp/modern.bin"
    "$PYTHON" tests/reference/evaluate_reference.py "$tmp/modern.bin" "$tmp/right.csv" > "$tmp/out" 2>&1
    check "a modern model passed" test $? -ne 0
    check "not one line saying it is of another architecture: $(last "$tmp/out")" says "$tmp/out" \
        "$tmp/modern.bin: version 6, a model of another architecture"
    end
else
    echo "SKIPPED evaluate_reference_checks_every_row (no numpy for $PYTHON: make venv)"
fi

# On the GPU: a d6 on the BPE, briefly trained (tests/programs/test_learning.sh's settings, 200 steps); the
# same of the modern architecture (its own lr default, 2e-3) after it.
gpu_cases="evaluate_learned_model_prefers_the_real_lines evaluate_batches_leave_the_scores evaluate_matches_the_float64_reference evaluate_learned_modern_model_prefers_the_real_lines"
./train_gpt --model d6 --context 256 -B 32 -T 256 --steps 200 --lr 1e-3 --warmup-steps 25 --min-lr-frac 0.1 \
    --weight-decay 0.1 --grad-clip 1 --seed 1 --val-every 0 --val-data '' \
    --train-data "$tmp/data/train_*.bin" --tokenizer "$tok" --out-dir "$tmp/run" > "$tmp/train.out" 2>&1
status=$?
if grep -q "^error: no CUDA device" "$tmp/train.out"; then
    for c in $gpu_cases; do echo "SKIPPED $c (no CUDA device)"; done
    exit $((failures > 0))
fi
model=$tmp/run/model_00000200.bin
if [ "$status" -ne 0 ] || [ ! -f "$model" ]; then
    echo "FAIL evaluate: train_gpt: $(last "$tmp/train.out")"
    exit 1
fi
trained=(--checkpoint "$model" --tokenizer "$tok")

# A model that learned some English prefers the real line over random letters. The threshold,
# 12 of the 16 knowable items (0.75) by the mean loss, was set before any run; chance is 0.25.
prefers_real_lines() {  # prefers_real_lines <case name> <out prefix> <evaluate's model options...>
    local name=$1 out=$2; shift 2
    begin "$name"
    ./evaluate "$@" --hellaswag "$items" --max-items 16 --scores "$out.csv" > "$out.out" 2>&1
    st=$?
    check "evaluate failed: $(last "$out.out")" test $st -eq 0
    right=$(sed -n 's/^hellaswag: .*, 16 items: acc .*, acc_norm [0-9.]* (\([0-9]*\) right)$/\1/p' "$out.out")
    check "acc_norm of ${right:-no} right out of 16, expected at least 12: $(last "$out.out")" \
        test "${right:-0}" -ge 12
    end
}
prefers_real_lines "evaluate_learned_model_prefers_the_real_lines" "$tmp/first16" "${trained[@]}"

# The full file in batches of 5 items (the last of 4) scores the first 16 items' rows in other
# batch positions and at another padded length: their ids and sum_loss (within 1e-2 relative:
# another matmul kernel for another shape may round some bf16 logits the other way) must be
# those of the run above; a row mixed up with another is off by far more.
begin "evaluate_batches_leave_the_scores"
./evaluate "${trained[@]}" --hellaswag "$items" --batch-items 5 --scores "$tmp/all.csv" > "$tmp/all.out" 2>&1
st=$?
check "evaluate failed: $(last "$tmp/all.out")" test $st -eq 0
check "not 24 items: $(last "$tmp/all.out")" has "$tmp/all.out" "^hellaswag: .*, 24 items: "
compared=$(awk -F, 'NR == FNR { if (FNR > 1) { ids[$1 "," $4] = $8; sum[$1 "," $4] = $6 } next }
    FNR > 1 && ($1 "," $4) in sum { k = $1 "," $4; n++; if ($8 != ids[k]) other++
        d = $6 - sum[k]; d = d < 0 ? -d : d; m = sum[k] < 0 ? -sum[k] : sum[k]; if (m < 1) m = 1
        if (d / m > worst) worst = d / m }
    END { printf "%d %d %g", n, other, worst }' "$tmp/first16.csv" "$tmp/all.csv")
read -r rows other worst <<< "$compared"
check "$rows rows of the first 16 items, expected 64" test "$rows" = 64
check "$other rows with other ids" test "$other" = 0
check "sum_loss differs by $worst relative, more than 1e-2" awk -v w="$worst" 'BEGIN { exit !(w <= 1e-2) }'
end

if [ -n "$numpy" ]; then
    begin "evaluate_matches_the_float64_reference"
    "$PYTHON" tests/reference/evaluate_reference.py "$model" "$tmp/all.csv" > "$tmp/reference.out" 2>&1
    st=$?
    check "$(grep -v '^sum_loss\|^mean_loss' "$tmp/reference.out" | head -1)" test $st -eq 0
    end
    cat "$tmp/reference.out"  # the worst errors, for the log
else
    echo "SKIPPED evaluate_matches_the_float64_reference (no numpy for $PYTHON: make venv)"
fi

# The modern architecture (a version 7 checkpoint): evaluate reads it and scores with its model.
./train_gpt --model d6 --context 256 -B 32 -T 256 --steps 200 --arch modern --warmup-steps 25 --min-lr-frac 0.1 \
    --weight-decay 0.1 --grad-clip 1 --seed 1 --val-every 0 --val-data '' \
    --train-data "$tmp/data/train_*.bin" --tokenizer "$tok" --out-dir "$tmp/modern" > "$tmp/modern_train.out" 2>&1
if [ $? -ne 0 ]; then
    echo "FAIL evaluate_learned_modern_model_prefers_the_real_lines: train_gpt: $(last "$tmp/modern_train.out")"
    exit 1
fi
prefers_real_lines "evaluate_learned_modern_model_prefers_the_real_lines" "$tmp/modern16" \
    --checkpoint "$tmp/modern/model_00000200.bin" --tokenizer "$tok"
exit $((failures > 0))
