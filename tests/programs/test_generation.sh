#!/usr/bin/env bash
# tests/programs/test_generation.sh: train_gpt's samples and generate's text come from one decoding path
# (gpt/inference.h). A d2 model trains 8 steps with a greedy sample of 100 tokens at the end
# (more than its context of 64, so the cache fills and slides); generate, greedy, from the
# checkpoint of that step, must print the first 63 of those tokens: the same text; for GPT-2's
# architecture and the modern one. Needs
# ./prepare_data, ./train_gpt, ./generate and a CUDA device; says SKIPPED without them. Prints
# PASS / FAIL lines like tests/lib/test.h.
set -u
cd "$(dirname "$0")/../.."
tmp=${FLASHGPT_TMP:-/tmp}/generation
if [ ! -x ./train_gpt ] || [ ! -x ./generate ]; then
    echo "SKIPPED generation (./train_gpt or ./generate is not built: no nvcc)"
    exit 0
fi
. tests/lib/cases.sh
rm -rf "$tmp"
mkdir -p "$tmp"
make_text "$tmp/text.txt" 300 7
./prepare_data --out-dir "$tmp/data" --vocab-size 300 --split-blank-lines "$tmp/text.txt" > "$tmp/prepare.out" 2>&1
# One run per architecture: GPT-2's, the modern one (rotary keys in the cache, the untied head,
# the soft-capped draw), its checkpoint of version 7, and the modern one with the 2026 recipe's
# parts (the embedding norm, the QK scale, the residual lambdas, the value embeddings, the
# smear, the backout), its checkpoint of version 9.
train() {  # train <out dir> [architecture options]: the run, its output in <out dir>.out
    local out=$1; shift
    ./train_gpt --model d2 --context 64 -B 4 -T 64 --steps 8 --lr 3e-3 --seed 3 --val-data '' "$@" \
        --train-data "$tmp/data/train_*.bin" --tokenizer "$tmp/data/tokenizer.bin" --out-dir "$out" \
        --sample-every 8 --sample-tokens 100 --temperature 0 > "$out.out" 2>&1
}
train "$tmp/run"
status=$?
if grep -q "^error: no CUDA device" "$tmp/run.out"; then
    echo "SKIPPED generation (no CUDA device)"
    exit 0
fi

check_same_text() {  # check_same_text <case name> <out dir> <train_gpt's status>
    begin "$1"
    check "train_gpt: $(tail -1 "$2.out")" test "$3" -eq 0
    ./generate --checkpoint "$2/model_00000008.bin" --tokenizer "$tmp/data/tokenizer.bin" --temperature 0 \
        --max-tokens 63 > "$2.generate" 2> "$2.err"
    check "generate: $(tail -1 "$2.err")" test $? -eq 0
    # The sample is the text after "sample: " in train_gpt's output; generate prints the prompt
    # (none here) and then the tokens.
    check "generate's 63 tokens are not the start of train_gpt's sample" python3 -c '
import sys
train = open(sys.argv[1], "rb").read()
text = open(sys.argv[2], "rb").read().rstrip(b"\n")
at = train.find(b"sample: ")
sys.exit(0 if at >= 0 and len(text) > 0 and train[at + 8:].startswith(text) else 1)' "$2.out" "$2.generate"
    check "the sample did not slide past the context: $(grep -c '' "$2.out") lines" \
        python3 -c '
import sys
train = open(sys.argv[1], "rb").read()
at = train.find(b"sample: ")
sample = train[at + 8:].split(b"\ncheckpoint: ")[0]
sys.exit(0 if len(sample) > len(open(sys.argv[2], "rb").read().rstrip(b"\n")) else 1)' "$2.out" "$2.generate"
    end
}
check_same_text "generate_prints_train_gpt_s_greedy_sample" "$tmp/run" "$status"
train "$tmp/modern" --arch modern
check_same_text "generate_prints_train_gpt_s_greedy_sample_modern" "$tmp/modern" $?
train "$tmp/parts" --arch modern --embedding-norm 1 --qk-scale 1.2 --residual-lambdas 1 --value-embeddings 1 --smear 1 \
    --backout 1
check_same_text "generate_prints_train_gpt_s_greedy_sample_modern_with_the_2026_parts" "$tmp/parts" $?

exit $((failures > 0))
