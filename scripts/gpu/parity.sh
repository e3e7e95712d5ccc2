#!/usr/bin/env bash
# scripts/gpu/parity.sh: the training-parity benchmark, on a GPU machine with PyTorch, from the
# repository root:
#   bash scripts/gpu/parity.sh DATASET_DIR
# DATASET_DIR holds prepare_data's output (train_*.bin, val_*.bin, tokenizer.bin) of a text of
# millions of tokens (scripts/make_parity_text.sh makes one). For each run (MODELS) and side
# (SIDES) it trains one epoch with every seed (SEEDS), the seeds of a side at once on the GPU
# (only the losses count here), and prints the validation curves side by side with their seed
# spread and the paired differences, then beside them the training loss and what the curves do
# after their lowest validation loss (scripts/compare_curves.py --train-loss).
# The runs are paired: for each run and seed, train_gpt first writes its initial weights
# (--save-init, on the host, to init-sSEED.bin beside the logs, removed once the sides have run),
# and the reference starts from them (--init-from) and reads train_gpt's data order for the seed
# (the same batches, epoch shuffles and validation batches: scripts/shard_batches.py); flashgpt
# draws the same weights from the seed itself. So a seed's runs differ by their numerics alone,
# not by the seed's draws, and compare_curves.py gives, beside each side's mean and spread over
# the seeds, the mean and spread of flashgpt minus the reference, seed by seed. The runs (MODELS):
#   d6:  B 32, T 512, lr 1e-3, one epoch, warmup over its first 10%
#   d12: B 16, T 1024, lr 6e-4, one epoch, warmup over its first 10%
#   d6-t256: make train's shape (B 32, T 256), lr 1e-3, 350 steps, warmup 25: GPT-2's recipe on
#        tinyshakespeare, whose final loss bounds tests/programs/test_learning.sh
#   all: cosine to 0.1 lr, AdamW 0.9/0.95, weight decay 0.1, clip 1, validation on 20 batches
#   every 25 steps.
# OPTIMIZER=muon trains every run of both sides with Muon instead (train_gpt's --optimizer muon,
# the reference's own Muon): lr $MUON_LR (0.02) for the blocks' matrices, momentum 0.95, Adam
# (0.8, 0.95) at 0.001 for the embeddings and 0.002 for the vectors, no weight decay; its logs go
# to a folder of the run's name with -muon after it.
# ARCH=modern trains the modern architecture on both sides instead of GPT-2's (--arch modern:
# rotary, RMSNorm, QK-norm, ReLU^2, no biases, an untied head, zero-initialised projections,
# logits soft-capped at 30): AdamW at lr $MODERN_LR (2e-3, the preset's) for every run; Muon as
# above but for wte at 0.05 and the head at 0.002 (the preset's); its logs go to a folder of the
# run's name with -modern after it (then -muon). WEIGHT_DECAY=X replaces the optimizer's weight
# decay (its folder gets -wdX). ARGS="..." adds options to both sides of every run after the run's
# own, an ablation of a component for instance (ARGS="--softcap 0"; its folder gets them too).
# ARCH=2026 trains the 2026 preset on both sides (--arch 2026: modern with every part of the 2026
# recipe and nanochat's key windows; README, The 2026 preset) at the preset's own optimizer and
# schedule: Muon with qkvw in head pairs and NorMuon, weight decay 0.1, wsd down to 0.05 of each
# rate over the last 65% of the steps, Muon's momentum from 0.85 over the first 300 steps,
# modern's rates. So neither side gets the optimizer, rates, weight decay or end of the others;
# the runs' shapes, warmup, clip and validation are theirs. OPTIMIZER=adamw, MUON_LR and MODERN_LR
# are refused in one line; WEIGHT_DECAY=X replaces the preset's decay, and ARGS another setting
# (ARGS="--optimizer adamw" trains AdamW, at the preset's AdamW rate, on its architecture). Its
# logs go to a folder of the run's name with -2026 after it, for instance:
#   ARCH=2026 MODELS="d6 d12" bash scripts/gpu/parity.sh datasets/python
# For instance, the d6-t256 run of the modern recipe on tinyshakespeare (datasets/tinyshakespeare:
# scripts/prepare_tinyshakespeare.sh), whose end tells over-fitting (the validation loss falls, then
# rises while the training loss falls) from divergence (the training loss rises too), both
# optimizers, about a minute each past the build:
#   ARCH=modern OPTIMIZER=muon MODELS=d6-t256 bash scripts/gpu/parity.sh datasets/tinyshakespeare
#   ARCH=modern MODELS=d6-t256 bash scripts/gpu/parity.sh datasets/tinyshakespeare
# Sides: flashgpt ($FLASHGPT, default ./train_gpt), flashgpt-base ($FLASHGPT_BASE, another build),
# reference (scripts/train_torch_reference.py), and reference+X for its --emulate X (for
# instance reference+residual,residual-grad). $FLASHGPT writes the initial weights the reference
# sides start from.
# RACE=1 (with d12 among MODELS) then times RACE_STEPS (100) steps of d12 alone for each side,
# flashgpt and the reference under torch.compile, and prints the training time each needs to
# reach the reference's mean final d12 validation loss: the step where its mean curve gets there,
# times its seconds per step alone.
# Logs go to $OUT/parity when OUT is set, else build/parity. An empty MODELS, SIDES or SEEDS, or
# a run or side of another name, is refused in one line before any work.
# Exits non-zero when a run fails, and its last line names the runs that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 1 "$@"
DATA=${1:-}
[ -n "$DATA" ] || gpu_refuse "give the dataset folder"
gpu_dataset "$DATA"
PYTHON=${PYTHON:-python3}
ARCH=${ARCH:-gpt2}
case $ARCH in
    gpt2) ARCH_ARGS=() ARCH_OPTIMIZER=adamw ;;   # nothing asked: a FLASHGPT_BASE of before --arch takes the runs too
    modern) ARCH_ARGS=(--arch modern) ARCH_OPTIMIZER=adamw ;;
    2026) ARCH_ARGS=(--arch 2026) ARCH_OPTIMIZER=muon ;;
    *) gpu_refuse "ARCH $ARCH: expected gpt2, modern or 2026" ;;
esac
OPTIMIZER=${OPTIMIZER:-$ARCH_OPTIMIZER}
case $OPTIMIZER in
    adamw) WD=0.1 ;;
    muon) WD=0 ;;
    *) gpu_refuse "OPTIMIZER $OPTIMIZER: expected adamw or muon" ;;
esac
WD=${WEIGHT_DECAY:-$WD}
if [ "$ARCH" = 2026 ]; then
    [ "$OPTIMIZER" = muon ] ||
        gpu_refuse "OPTIMIZER $OPTIMIZER: ARCH 2026 trains with Muon, its own (ARGS=\"--optimizer adamw\" trains AdamW)"
    for var in MUON_LR MODERN_LR; do
        [ -z "${!var:-}" ] || gpu_refuse "$var: ARCH 2026 trains at its preset's rates (ARGS=\"--lr X\" sets one)"
    done
fi
MODELS=${MODELS-"d6 d12"}
RACE_STEPS=${RACE_STEPS:-100}
SEEDS=${SEEDS:-"1 2 3"}
SIDES=${SIDES:-"flashgpt reference"}
FLASHGPT=${FLASHGPT:-./train_gpt}
LOGS=${OUT:-build}/parity

# run_shape <run>: the model, B, T, lr, steps and warmup of the run (no steps: one epoch of the
# train shards); status 1 for no such run.
run_shape() {
    case $1 in
        d6) MODEL=d6 B=32 T=512 LR=1e-3 STEPS= ;;
        d12) MODEL=d12 B=16 T=1024 LR=6e-4 STEPS= ;;
        d6-t256) MODEL=d6 B=32 T=256 LR=1e-3 STEPS=350 WARMUP=25 ;;
        *) return 1 ;;
    esac
}

for var in MODELS SIDES SEEDS; do
    [ -n "$(printf %s ${!var})" ] || gpu_refuse "$var is empty: no run would be made"
done
for name in $MODELS; do run_shape "$name" || gpu_refuse "MODELS: no parity run called $name"; done
for side in $SIDES; do
    case $side in
        flashgpt|reference|reference-compile|reference+?*) ;;
        flashgpt-base) [ -n "${FLASHGPT_BASE:-}" ] || gpu_refuse "SIDES: flashgpt-base needs FLASHGPT_BASE, the other build" ;;
        *) gpu_refuse "SIDES: no side called $side" ;;
    esac
done

mkdir -p "$LOGS"

if [ "$FLASHGPT" = ./train_gpt ]; then
    echo "== build ($(elapsed))"
    gpu_build_train_gpt "$LOGS"
fi

# shape <run>: run_shape, the optimizer's options of the optimizer and architecture in
# OPTIMIZER_ARGS (its rates, weight decay and end; 2026: the preset's own, but a WEIGHT_DECAY
# given), and for a run of one epoch its steps, the warmup their first 10%.
shape() {
    run_shape "$1"
    if [ "$ARCH" = 2026 ]; then
        OPTIMIZER_ARGS=(${WEIGHT_DECAY:+--weight-decay "$WEIGHT_DECAY"})
    else
        local rates=()
        if [ "$OPTIMIZER" = muon ]; then
            LR=${MUON_LR:-0.02}
            rates=(--vector-lr 0.002 --embedding-lr 0.001)
            [ "$ARCH" = gpt2 ] || rates=(--embedding-lr 0.05 --head-lr 0.002)
        elif [ "$ARCH" = modern ]; then
            LR=${MODERN_LR:-2e-3}
        fi
        OPTIMIZER_ARGS=(--optimizer "$OPTIMIZER" --lr "$LR" ${rates[@]+"${rates[@]}"} --min-lr-frac 0.1
                        --weight-decay "$WD")
    fi
    if [ -z "$STEPS" ]; then
        STEPS=$(( ($(gpu_training_tokens "$DATA") - 1) / T / B ))
        WARMUP=$((STEPS / 10))
    fi
}

# run <side> <run> <seed> <log> [ARGS]: one run, its CSV in <log>.csv and its output in
# <log>.out; ARGS come last, so they override the run's own. The side init writes the seed's
# initial weights, which the reference sides start from, to init-s<seed>.bin in <log>'s folder.
run() {
    local side=$1 name=$2 seed=$3 log=$4
    local init
    init=$(dirname "$log")/init-s$seed.bin
    shift 4
    local common=(--model "$MODEL" ${ARCH_ARGS[@]+"${ARCH_ARGS[@]}"} --context "$T" -T "$T" -B "$B"
                  ${OPTIMIZER_ARGS[@]+"${OPTIMIZER_ARGS[@]}"} --steps "$STEPS" --warmup-steps "$WARMUP" --grad-clip 1
                  --seed "$seed" --val-every 25 --val-batches 20 --train-data "$DATA/train_*.bin"
                  --val-data "$DATA/val_*.bin" --log "$log.csv" ${ARGS:-} "$@")
    case $side in
        init) "$FLASHGPT" "${common[@]}" --tokenizer "$DATA/tokenizer.bin" --save-init "$init" ;;
        flashgpt) "$FLASHGPT" "${common[@]}" --tokenizer "$DATA/tokenizer.bin" ;;
        flashgpt-base) "$FLASHGPT_BASE" "${common[@]}" --tokenizer "$DATA/tokenizer.bin" ;;
        reference) "$PYTHON" scripts/train_torch_reference.py "${common[@]}" --init-from "$init" ;;
        reference-compile) "$PYTHON" scripts/train_torch_reference.py "${common[@]}" --init-from "$init" --compile ;;
        reference+*) "$PYTHON" scripts/train_torch_reference.py "${common[@]}" --init-from "$init" \
                         --emulate "${side#reference+}" ;;
    esac > "$log.out" 2>&1 || { echo "   $side $name seed $seed failed: $(tail -1 "$log.out")"; return 1; }
}

# The logs' folder of a run: its name, then the architecture but for GPT-2's, the optimizer but for
# the architecture's own (2026's Muon, the others' AdamW), and a weight decay given.
run_dir() {
    local dir=$LOGS/$1
    [ "$ARCH" = gpt2 ] || dir=$dir-$ARCH
    [ "$OPTIMIZER" = "$ARCH_OPTIMIZER" ] || dir=$dir-$OPTIMIZER
    dir=$dir${WEIGHT_DECAY:+-wd$WEIGHT_DECAY}
    [ -z "${ARGS:-}" ] || dir=$dir$(printf %s "${ARGS// /}" | tr -c 'A-Za-z0-9.,=-' _)
    echo "$dir"
}

for name in $MODELS; do
    shape "$name"
    dir=$(run_dir "$name")
    mkdir -p "$dir"
    echo "== $name initial weights of seeds $SEEDS, by train_gpt --save-init ($(elapsed))"
    pids=()
    for seed in $SEEDS; do run init "$name" "$seed" "$dir/init-s$seed" & pids+=($!); done
    for pid in "${pids[@]}"; do wait "$pid" || step_failed "$name init"; done
    for side in $SIDES; do
        echo "== $name $side ($ARCH, $OPTIMIZER), seeds $SEEDS at once, $STEPS steps of B $B T $T ($(elapsed))"
        pids=()
        for seed in $SEEDS; do run "$side" "$name" "$seed" "$dir/$side-s$seed" & pids+=($!); done
        for pid in "${pids[@]}"; do wait "$pid" || step_failed "$name $side"; done
    done
    for seed in $SEEDS; do rm -f "$dir/init-s$seed.bin"; done
    args=()
    for side in $SIDES; do args+=("$side" "$dir/$side-s*.csv"); done
    echo "== $name: validation loss by step ($(elapsed))"
    "$PYTHON" scripts/compare_curves.py "${args[@]}" --train-loss | tee "$dir/curves.md"
    [ "${PIPESTATUS[0]}" = 0 ] || step_failed "$name curves"
done

if [ "${RACE:-0}" = 1 ]; then
    shape d12
    race=$(run_dir race)
    mkdir -p "$race"
    run init d12 1 "$race/init-s1" || step_failed "race init"
    for side in flashgpt reference-compile; do
        echo "== race: d12 $side alone, $RACE_STEPS steps for its time per step ($(elapsed))"
        run "$side" d12 1 "$race/$side" --steps "$RACE_STEPS" --val-every 0 || step_failed "race $side"
        grep -h "^done" "$race/$side.out"
    done
    rm -f "$race/init-s1.bin"
    echo "== race: the d12 curves at the speed of each side alone ($(elapsed))"
    "$PYTHON" scripts/compare_curves.py reference "$(run_dir d12)/reference-s*.csv" flashgpt "$(run_dir d12)/flashgpt-s*.csv" \
        --timing reference="$race/reference-compile.csv" --timing flashgpt="$race/flashgpt.csv" |
        tail -3 | tee "$race/time_to_loss.md"
fi
echo "== done ($(elapsed)), logs in $LOGS"
gpu_finish
