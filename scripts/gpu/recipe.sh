#!/usr/bin/env bash
# scripts/gpu/recipe.sh: the 2026 recipe's ablations on one GPU, from the repository root:
#   bash scripts/gpu/recipe.sh DATASET_DIR                 (MODE=alone: each part alone)
#   MODE=out bash scripts/gpu/recipe.sh DATASET_DIR        (each part taken out of NEW_PRESET)
#   PARTS_FILTER="qk-scale wsd" bash scripts/gpu/recipe.sh DATASET_DIR
# DATASET_DIR holds prepare_data's output (train_*.bin, val_*.bin, tokenizer.bin) of a real text
# of at least 5M tokens (`bash scripts/make_parity_text.sh python DIR` makes one; nothing is
# fetched). Every run is d12, B 16, T 1024, one epoch of the text, seed 1 (the same initial
# draw and data order), validation on 20 batches every 25 steps, one run at a time, on top of
# the base: --arch modern --optimizer muon at the preset's rates with muon.sh's schedule (warmup
# over the first 10% of the steps, a cosine to 0.1, clip 1). The parts are the rows of PARTS
# below: a name, the train_gpt options that turn it on, and the part it needs, if any.
#   MODE=alone (the default): the base, then the base with each part (and the part it needs).
#   MODE=out: the base, NEW_PRESET (the full set: train_gpt options, by default every part the
#     new preset is thought to take, listed in NEW_PRESET_PARTS below), then NEW_PRESET with each
#     part's options taken out (and those of the parts that need it); rows whose options the set
#     does not hold are left out.
# PARTS_FILTER: the rows to run, names or shell patterns separated by spaces [every row].
# It prints the estimated time (runs x steps) first, then a table: each run's final validation
# loss and its difference from the base's (MODE=out: from the full set's), its ms per step (from
# its tokens/s past the first step) and the difference, the step at which its curve reaches the
# base's final validation loss (linearly between validations) and its shares of the base's steps
# and training time (scripts/compare_curves.py --runs, validation excluded), then the curves.
# A run on a text of 7.5M tokens is estimated at about 25 s on an H100 (not yet measured); split
# the rows with PARTS_FILTER where the estimate passes a call of 10 minutes. Logs go to $OUT/recipe when OUT is
# set, else build/recipe. Exits non-zero when a run fails, its last line naming the runs that did.
set -u
. "$(dirname "$0")/common.sh"

# The parts: name | train_gpt options | the part it needs, at nanochat's values: its weight decay
# 0.28 scaled by sqrt(16K / 512K tokens a step) to this batch, as its rule does; its momentum from
# 0.85 up to 0.97, down to 0.90 over its learning rate's warm-down ({stable} and {warmdown} stand
# for the steps before and in a warm-down over the last 65% of the run); its windows a quarter of
# T 1024 in three layers of four; its Adam rates at 0.5M tokens a step.
PARTS="
align-documents       | --align-documents |
muon-qkv-split        | --muon-qkv split |
muon-qkv-head-pairs   | --muon-qkv head-pairs |
polar-express         | --muon-ns polar |
normuon               | --normuon |
weight-decay          | --weight-decay 0.05 --weight-decay-schedule linear |
cautious-weight-decay | --cautious-weight-decay | weight-decay
wsd                   | --lr-schedule wsd --warmdown-frac 0.65 --min-lr-frac 0.05 |
momentum-schedule     | --muon-momentum 0.97 --momentum-warmup-steps {stable} --momentum-start 0.85 --momentum-cooldown-steps {warmdown} --momentum-end 0.9 |
no-grad-clip          | --grad-clip 0 |
embedding-norm        | --embedding-norm 1 |
qk-scale              | --qk-scale 1.2 |
residual-lambdas      | --residual-lambdas 1 |
rotary-base           | --rotary-base 100000 |
softcap-15            | --softcap 15 |
window-pattern        | --window-pattern 256,256,256,full |
nanochat-init         | --init nanochat |
adam-betas            | --embedding-beta2 0.995 --head-beta2 0.96 |
adam-rates            | --embedding-lr 0.3 --head-lr 0.008 |
head-size-128         | --head-size 128 |
"
# The parts of the full set MODE=out takes its parts out of, when NEW_PRESET is not given.
NEW_PRESET_PARTS="align-documents muon-qkv-split polar-express normuon weight-decay cautious-weight-decay wsd
momentum-schedule no-grad-clip embedding-norm qk-scale residual-lambdas rotary-base softcap-15 window-pattern
nanochat-init adam-betas adam-rates head-size-128"

gpu_arguments 1 "$@"
DATA=${1:-}
[ -n "$DATA" ] || gpu_refuse "give the dataset folder"
MODE=${MODE:-alone}
case $MODE in alone|out) ;; *) gpu_refuse "MODE $MODE: expected alone or out" ;; esac
PYTHON=${PYTHON:-python3}
LOGS=${OUT:-build}/recipe
B=16 T=1024

# The table's rows: NAMES in order, OPTIONS and NEEDS by name.
declare -A OPTIONS=() NEEDS=()
NAMES=()
while IFS='|' read -r name options needs; do
    name=$(echo $name) options=$(echo $options) needs=$(echo $needs)
    [ -n "$name" ] || continue
    NAMES+=("$name")
    OPTIONS[$name]=$options
    NEEDS[$name]=$needs
done <<< "$PARTS"

# part_options NAME: the options of part NAME and of the part it needs, the latter first.
part_options() {
    local needs=${NEEDS[$1]}
    echo ${needs:+${OPTIONS[$needs]}} ${OPTIONS[$1]}
}

# The rows PARTS_FILTER picks; a name or pattern that picks none is refused.
SELECTED=()
if [ -n "$(printf %s ${PARTS_FILTER:-})" ]; then
    for pattern in $PARTS_FILTER; do
        picked=0
        for name in "${NAMES[@]}"; do
            # shellcheck disable=SC2254  # the pattern is one on purpose
            case $name in $pattern) picked=1 ;; esac
        done
        [ "$picked" = 1 ] || gpu_refuse "PARTS_FILTER: no part called $pattern (the rows of PARTS at the top of $GPU_SCRIPT)"
    done
    for name in "${NAMES[@]}"; do
        for pattern in $PARTS_FILTER; do
            # shellcheck disable=SC2254
            case $name in $pattern) SELECTED+=("$name"); break ;; esac
        done
    done
else
    SELECTED=("${NAMES[@]}")
fi
gpu_dataset "$DATA"
mkdir -p "$LOGS"

tokens=$(gpu_training_tokens "$DATA")
STEPS=$(( (${tokens:-0} - 1) / T / B ))
WARMUP=$(( STEPS / 10 ))
WARMDOWN=$(( (STEPS * 65 + 50) / 100 ))
STABLE=$(( STEPS - WARMDOWN ))
echo "data: $DATA, ${tokens:-?} training tokens: one epoch is $STEPS steps of B $B, T $T"
[ "${tokens:-0}" -ge 5000000 ] || echo "note: fewer than 5M training tokens"

# with_steps OPTIONS: the options with {stable} and {warmdown} replaced by their steps.
with_steps() {
    local s=${1//\{stable\}/$STABLE}
    echo "${s//\{warmdown\}/$WARMDOWN}"
}

# without WORDS SET: SET with the words WORDS taken out where they stand together, or nothing
# (exit status 1) when SET does not hold them.
without() {
    local set=" $(echo $2) " words=" $(echo $1) "
    [[ $set == *"$words"* ]] || return 1
    set=${set/"$words"/ }
    echo $set
}

# The runs: name and train_gpt options past the base's, in RUN_NAMES and RUN_OPTIONS.
RUN_NAMES=(base) RUN_OPTIONS=("")
if [ "$MODE" = alone ]; then
    REFERENCE=base
    for name in "${SELECTED[@]}"; do
        RUN_NAMES+=("with-$name")
        RUN_OPTIONS+=("$(with_steps "$(part_options "$name")")")
    done
else
    REFERENCE=full
    if [ -z "${NEW_PRESET:-}" ]; then
        NEW_PRESET=""
        for name in $NEW_PRESET_PARTS; do
            [ -n "${OPTIONS[$name]+set}" ] || gpu_refuse "NEW_PRESET_PARTS: no part called $name"
            NEW_PRESET="$NEW_PRESET ${OPTIONS[$name]}"
        done
    fi
    full=$(echo $(with_steps "$NEW_PRESET"))
    RUN_NAMES+=(full) RUN_OPTIONS+=("$full")
    echo "the full set: $full"
    for name in "${SELECTED[@]}"; do
        # Out goes the part, and with it each part that needs it.
        rest=$(without "$(with_steps "${OPTIONS[$name]}")" "$full") ||
            { echo "note: $name is not in the full set (${OPTIONS[$name]}): left out"; continue; }
        for other in "${NAMES[@]}"; do
            if [ "${NEEDS[$other]}" = "$name" ]; then rest=$(without "$(with_steps "${OPTIONS[$other]}")" "$rest") || true; fi
        done
        RUN_NAMES+=("without-$name") RUN_OPTIONS+=("$rest")
    done
fi

# The estimate: each step about 30 ms, each validation batch 10 ms, and 8 s to start a run.
runs=${#RUN_NAMES[@]}
estimate=$(( runs * (STEPS * 30 + (STEPS / 25 + 1) * 20 * 10 + 8000) / 1000 ))
echo "estimate: $runs runs x $STEPS steps, about $estimate s past the build on an H100"
[ "$estimate" -le 540 ] || echo "note: more than 9 minutes: split the rows with PARTS_FILTER to fit a call of 10 minutes"

echo "== build ($(elapsed))"
gpu_build_train_gpt "$LOGS"

for i in "${!RUN_NAMES[@]}"; do
    run=${RUN_NAMES[$i]} options=${RUN_OPTIONS[$i]}
    echo "== $run: ${options:-(the base)} ($(elapsed))"
    rm -f "$LOGS/$run.csv"
    # shellcheck disable=SC2086  # the run's options are words
    ./train_gpt --model d12 --arch modern --optimizer muon --context "$T" -T "$T" -B "$B" --steps "$STEPS" \
        --warmup-steps "$WARMUP" --min-lr-frac 0.1 --grad-clip 1 --seed 1 --val-every 25 --val-batches 20 \
        --train-data "$DATA/train_*.bin" --val-data "$DATA/val_*.bin" --tokenizer "$DATA/tokenizer.bin" $options \
        --log "$LOGS/$run.csv" > "$LOGS/$run.out" 2>&1 || { tail -2 "$LOGS/$run.out"; step_failed "$run"; }
done

echo "== the runs against the base's final validation loss ($(elapsed))"
logs=()
for run in "${RUN_NAMES[@]}"; do [ -f "$LOGS/$run.csv" ] && logs+=("$LOGS/$run.csv"); done
"$PYTHON" scripts/compare_curves.py --runs --baseline base ${logs[@]+"${logs[@]}"} > "$LOGS/curves.md" ||
    step_failed "table"
# compare_curves' rows "| run | final | S of N | t of total | steps %, time % | K tokens/s |", as
# the ablation table: each run against the reference run's final loss and ms per step.
echo "| run | final val loss | Δ vs $REFERENCE | ms/step | Δ ms | step reaching base's final | share of base's steps, time |"
echo "|---|---|---|---|---|---|---|"
awk -F'|' -v ref="$REFERENCE" -v tokens=$((B * T)) '
    /^\| (base|full|with-|without-)/ {
        name = $2; gsub(/ /, "", name)
        n++; names[n] = name; final[name] = $3 + 0; reach[name] = $4; share[name] = $6; gsub(/^ +| +$/, "", share[name])
        rate = $7; gsub(/[ K]/, "", rate); ms[name] = rate > 0 ? tokens / rate : 0
    }
    END {
        for (i = 1; i <= n; i++) {
            x = names[i]; split(reach[x], r, " of "); gsub(/^ +| +$/, "", r[1])
            d = (ref in final) ? sprintf("%+.4f", final[x] - final[ref]) : "-"
            dm = (ref in ms) && ms[x] > 0 && ms[ref] > 0 ? sprintf("%+.1f", ms[x] - ms[ref]) : "-"
            printf "| %s | %.4f | %s | %.1f | %s | %s | %s |\n", x, final[x], d, ms[x], dm, r[1], share[x]
        }
    }' "$LOGS/curves.md" | tee "$LOGS/table.md"
cat "$LOGS/curves.md"
echo "== done ($(elapsed)), logs in $LOGS"
gpu_finish
