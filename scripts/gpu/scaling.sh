#!/usr/bin/env bash
# train_gpt on every GPU of this node, in one command from the repository root:
#   bash scripts/gpu/scaling.sh
# runs the multi-GPU tests (make test: the 2-rank cases of tests/unit/gpt/test_gpt.cu and test_nccl), then
# d12 (T = 1024, B = 64 per GPU) on 1 and N GPUs next to PyTorch DDP + torch.compile
# (scripts/bench_torch_gpt2.py under torchrun) on the same GPUs, d48 on N GPUs with and without
# --zero 1, and d12 with the sequence split over the N GPUs (--context-parallel N, T = CP_T);
# ends with a summary table. NCCL's NVLink multicast stays off (NCCL_NVLS_ENABLE=0). Logs go to
# $OUT when set, else build/scaling-logs. STEPS and CP_T change the run lengths. Exits non-zero
# when a step fails, and its last line names the steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 0 "$@"
LOGS=${OUT:-build/scaling-logs}
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-12}
CP_T=${CP_T:-262144}
export NCCL_NVLS_ENABLE=0
mkdir -p "$LOGS"
N=$(nvidia-smi -L | wc -l)

echo "== make test on $N GPUs ($(elapsed))"
make -j"$(nproc)" test > "$LOGS/make_test.log" 2>&1
status=$?
echo "make test: $(tail -1 "$LOGS/make_test.log") (exit status $status)"
grep -E '^(FAIL|SKIPPED) ' "$LOGS/make_test.log"
[ "$status" -eq 0 ] || step_failed "make test"

data=build/scaling-data
mkdir -p "$data"
"$PYTHON" scripts/random_tokens.py "$data/random_000000.bin" 2000001 || step_failed "random tokens"
train() {  # <log name> <train_gpt options...>
    local name=$1
    shift
    echo "== train_gpt $* ($(elapsed))"
    timeout 600 ./train_gpt "$@" --train-data "$data/random_*.bin" --val-data '' > "$LOGS/$name.log" 2>&1 ||
        { tail -3 "$LOGS/$name.log"; step_failed "train_gpt $name"; }
}
torch() {  # <log name> <GPUs>
    echo "== torch d12 on $2 GPUs ($(elapsed))"
    timeout 600 torchrun --standalone --nproc_per_node "$2" scripts/bench_torch_gpt2.py -B 64 -T 1024 \
        --steps "$STEPS" --warmup 3 > "$LOGS/$1.log" 2>&1 || { tail -3 "$LOGS/$1.log"; step_failed "torch $1"; }
}
train d12-1 --gpus 1 --model d12 -T 1024 -B 64 --steps "$STEPS"
train d12-$N --gpus "$N" --model d12 -T 1024 -B 64 --steps "$STEPS"
torch torch-1 1
torch torch-$N "$N"
train d48-$N --gpus "$N" --model d48 -T 1024 -B 8 --steps 6
train d48-$N-zero --gpus "$N" --zero 1 --model d48 -T 1024 -B 8 --steps 6
train cp-$N --gpus "$N" --context-parallel "$N" --model d12 --context "$CP_T" -T "$CP_T" -B 1 --steps 4 \
    --recompute gelu,layernorm

# "<tokens/s in K> <GiB>" from a log, or "? ?"
ours() { local r; r=$(sed -n 's/^done: \([0-9.]*\)K tokens.s.*memory in use \([0-9.]*\) GiB.*/\1 \2/p' "$LOGS/$1.log"); echo "${r:-? ?}"; }
theirs() { local r; r=$(sed -n 's/.*: \([0-9.]*\)K tokens.s .*peak allocated \([0-9.]*\) GiB.*/\1 \2/p' "$LOGS/$1.log"); echo "${r:-? ?}"; }
eff() { awk -v a="$1" -v b="$2" -v n="$N" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", b / (n * a); else print "?" }'; }
row() {  # <name> <one-GPU "tokens GiB"> <N-GPU "tokens GiB">
    set -- "$1" $2 $3
    echo "| $1 | $2K | $4K | $(eff "$2" "$4") | $5 |"
}
echo
echo "== summary ($(elapsed)), logs in $LOGS"
echo "| d12, T 1024, B 64 per GPU | 1 GPU tokens/s | $N GPUs tokens/s | efficiency | GiB per GPU on $N |"
echo "|---|---|---|---|---|"
row train_gpt "$(ours d12-1)" "$(ours d12-$N)"
row "PyTorch DDP + torch.compile" "$(theirs torch-1)" "$(theirs torch-$N)"
echo
echo "| run on $N GPUs | tokens/s | GiB per GPU |"
echo "|---|---|---|"
for run in d48-$N d48-$N-zero cp-$N; do
    set -- $(ours "$run")
    echo "| $run | $1K | $2 |"
done
gpu_finish
