#!/usr/bin/env bash
# tests/test_train_gpt_inputs.sh: train_gpt against bad inputs that must stop it with one line
# before the GPU is touched: flags out of range. Also which validation shards the default
# --val-data finds, and that it says when there are none. Needs ./prepare_data and ./train_gpt
# (SKIPPED without train_gpt); prints PASS / FAIL lines like tests/test.h.
set -u
cd "$(dirname "$0")/.."
if [ ! -x ./train_gpt ]; then
    echo "SKIPPED train_gpt_inputs (./train_gpt is not built: no nvcc)"
    exit 0
fi
tmp=${FLASHGPT_TMP:-/tmp}/train_gpt_inputs
rm -rf "$tmp"
mkdir -p "$tmp"
failures=0
case_name=
case_failed=0
begin() { case_name=$1; case_failed=0; }
check() {  # check <what> <command...>: fails the case when the command fails
    local what=$1; shift
    if ! "$@" >/dev/null 2>&1; then
        [ "$case_failed" = 0 ] && echo "FAIL $case_name: $what" || echo "    also: $what"
        case_failed=1
    fi
}
end() {
    if [ "$case_failed" = 0 ]; then echo "PASS $case_name"; else failures=$((failures + 1)); fi
}
has() { grep -q -- "$2" "$1"; }
has_line() { grep -qxF -- "$2" "$1"; }
not() { ! "$@"; }
# The run's one error line is exactly the expected one, or starts with it.
says() { [ "$(grep -c '^error: ' "$1")" = 1 ] && grep -q -- "^error: $2" "$1"; }
last() { grep '^error' "$1" | tail -1; }

make_text() {  # make_text <path> <paragraphs> <seed>
    awk -v n="$2" -v s="$3" 'BEGIN { srand(s); split("the of and to in a is that for it as was with be by on not he this are or his from", w)
        for (p = 0; p < n; p++) { for (l = 0; l < 4; l++) { line = ""
            for (k = 0; k < 9; k++) line = line w[int(rand() * 22) + 1] " "; print line }
            print "" } }' > "$1"
}
make_text "$tmp/a.txt" 400 1
make_text "$tmp/b.txt" 400 2
./prepare_data --out-dir "$tmp/ds" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>&1

# The train glob goes to train_gpt unexpanded, as quoted on a command line.
train="$tmp/ds/train_*.bin"

begin "train_gpt_default_val_data_beside_the_train_shards"
# The train shards in a folder whose own name has train_ in it, and a sibling val_x/ of other
# shards: the default is the val shard beside the train shards, never the sibling's.
./prepare_data --out-dir "$tmp/vd/train_x" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>&1
./prepare_data --out-dir "$tmp/vd/val_x" --vocab-size 300 --split-blank-lines "$tmp/b.txt" >/dev/null 2>&1
vd_train="$tmp/vd/train_x/train_*.bin"
vd="--model d2 --context 64 -B 1 -T 64"
./train_gpt --train-data "$vd_train" $vd > "$tmp/out" 2>&1
check "the val shard beside: $(grep '^val data' "$tmp/out" || last "$tmp/out")" has_line "$tmp/out" \
    "val data: $tmp/vd/train_x/val_*.bin: 1 shard ($tmp/vd/train_x/val_000000.bin), 20 batches every 100 steps"
check "the start-up lines name the train shards" has_line "$tmp/out" \
    "train data: $tmp/vd/train_x/train_*.bin: 1 shard ($tmp/vd/train_x/train_000000.bin), 265 batches per epoch"
check "the sibling's shards taken" not has "$tmp/out" "val_x"
check "then the GPU: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
rm "$tmp/vd/train_x/val_000000.bin"
./train_gpt --train-data "$vd_train" $vd > "$tmp/out" 2>&1
check "no val shard, said: $(grep '^val data' "$tmp/out" || last "$tmp/out")" has_line "$tmp/out" \
    "val data: none (no file matches $tmp/vd/train_x/val_*.bin), so validation is off"
./train_gpt --train-data "$vd_train" $vd --val-data '' > "$tmp/out" 2>&1
check "--val-data '', said: $(grep '^val data' "$tmp/out" || last "$tmp/out")" has_line "$tmp/out" \
    "val data: none (--val-data ''), so validation is off"
./train_gpt --train-data "$vd_train" $vd --val-every 0 > "$tmp/out" 2>&1
check "--val-every 0, said: $(grep '^val data' "$tmp/out" || last "$tmp/out")" has_line "$tmp/out" \
    "val data: none (--val-every 0), so validation is off"
end

begin "train_gpt_flags_out_of_range"
data="--model d2 --context 64 -T 64"
./train_gpt --train-data "$train" $data --weight-decay -1 > "$tmp/out" 2>&1
check "--weight-decay -1: $(last "$tmp/out")" says "$tmp/out" "--weight-decay -1 must be >= 0"
./train_gpt --train-data "$train" $data --grad-clip -1 > "$tmp/out" 2>&1
check "--grad-clip -1: $(last "$tmp/out")" says "$tmp/out" "--grad-clip -1 must be >= 0"
./train_gpt --train-data "$train" $data --peak-tflops -5 > "$tmp/out" 2>&1
check "--peak-tflops -5: $(last "$tmp/out")" says "$tmp/out" "--peak-tflops -5: a peak must be positive"
./train_gpt --train-data "$train" $data --recompute '' > "$tmp/out" 2>&1
check "--recompute '': $(last "$tmp/out")" says "$tmp/out" "--recompute '': expected none or"
./train_gpt --train-data "$train" $data --recompute gelu, > "$tmp/out" 2>&1
check "--recompute gelu,: $(last "$tmp/out")" says "$tmp/out" "--recompute 'gelu,': expected none or"
# 0 keeps its meaning (no decay, no clipping), and the lists that are right pass.
./train_gpt --train-data "$train" $data --weight-decay 0 --grad-clip 0 --peak-tflops 100 --recompute gelu,layernorm > "$tmp/out" 2>&1
check "0 and good values refused: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
end

exit $((failures > 0))
