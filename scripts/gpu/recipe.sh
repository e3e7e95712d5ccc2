#!/usr/bin/env bash
# scripts/gpu/recipe.sh: the 2026 recipe's ablations and its bars on one GPU, from the repository root:
#   bash scripts/gpu/recipe.sh DATASET_DIR                 (MODE=alone: each part alone)
#   MODE=out bash scripts/gpu/recipe.sh DATASET_DIR        (each part taken out of NEW_PRESET)
#   MODE=sets bash scripts/gpu/recipe.sh DATASET_DIR       (the sets of SETS against the base)
#   MODE=race bash scripts/gpu/recipe.sh DATASET_DIR       (tokens/s against the PyTorch reference)
#   PARTS_FILTER="qk-scale wsd" bash scripts/gpu/recipe.sh DATASET_DIR
# DATASET_DIR holds prepare_data's output (train_*.bin, val_*.bin, tokenizer.bin) of a real text
# of at least 5M tokens (`bash scripts/make_parity_text.sh python DIR` makes one; nothing is
# fetched). Every run is d12, B 16, T 1024, one epoch of the text, seed 1 (the same initial
# draw and data order), validation on 20 batches every 25 steps, one run at a time, on top of
# the base: --arch modern --optimizer muon at the preset's rates with muon.sh's schedule (warmup
# over the first 10% of the steps, a cosine to 0.1, clip 1). The parts are the rows of PARTS
# below: a name, the train_gpt options that turn it on, and the part it needs, if any.
#   MODE=alone (the default): the base, then the base with each part (and the part it needs).
#   MODE=out: the base, NEW_PRESET (the full set: train_gpt options, by default those of the
#     parts listed in NEW_PRESET_PARTS below, the set the measurements so far support), then
#     NEW_PRESET with each part's options taken out (and those of the parts that need it); rows
#     whose options the set does not hold are left out.
#   MODE=sets: the base, then each set of SETS below (train_gpt options past the base's, {preset}
#     standing for NEW_PRESET's): the candidate preset and its variants (nanochat's init, its Adam
#     rates and betas, head size 128, Muon's lr, full attention in every layer).
#   MODE=race: tokens/s of train_gpt with each set of RACE_SET [candidate candidate-dense]
#     against the PyTorch reference of the same options (scripts/train_torch_reference.py
#     --compile) on the same GPU, one after the other, at T 1024, B 16 and B 64 (RACE_BATCHES),
#     RACE_STEPS [40] steps of the text each without validation; tokens/s over the steps past the
#     first RACE_WARMUP [10] (which compile), from each side's log. The bar: train_gpt at least
#     1.2x the reference (whose windows take SDPA off its flash kernel: candidate-dense races
#     both at full attention).
# PARTS_FILTER: the rows to run (MODE=sets: of SETS; MODE=race takes none), names or shell
# patterns separated by spaces [every row]; the base always runs.
# It prints the estimated time first (the runs' steps at about 30 ms, validation, 10 s to start a
# run of train_gpt and 60 s one of torch.compile; the build apart: seconds on a machine that has
# built before, minutes on a fresh one), then a table: each run's final validation loss and its
# difference from the base's (MODE=out: from the full set's), its ms per step (from its tokens/s
# past the first step) and the difference, the step at which its curve reaches the base's final
# validation loss (linearly between validations) and its shares of the base's steps and
# training time (scripts/compare_curves.py --runs, validation excluded); MODE=sets adds whether
# each set meets the preset's bars (at least 0.6 nats below the base, the base's final loss
# in at most 50% of its steps and 55% of its time); then the curves. MODE=race prints the table
# of tokens/s of both sides and their ratio. A d12 run on a text of 7.5M tokens (461 steps) takes
# about 30 s on an H100 (28 ms a step measured, the start estimated); the rows are split with
# PARTS_FILTER where the estimate passes 450 s (the build and a call of 10 minutes). Logs go to
# build/recipe/MODE and, when OUT is set, after each run into one file, $OUT/recipe-MODE.tar.gz.
# Exits non-zero when a run fails, its last line naming the runs that did.
set -u
. "$(dirname "$0")/common.sh"

# The parts: name | train_gpt options | the part it needs. The values are those measured on an
# H100 (bench/HISTORY.md, the 2026 recipe): weight decay 0.1, Muon's momentum from 0.85 up to
# its 0.95 over the first 300 steps. The rows named -nanochat hold nanochat's values, not yet
# measured here: its weight decay 0.28 scaled by sqrt(16K / 512K tokens a step) to this batch, as
# its rule does, on a linear schedule; its momentum from 0.85 up to 0.97, down to 0.90 over its
# learning rate's warm-down ({stable} and {warmdown} stand for the steps before and in a
# warm-down over the last 65% of the run). The windows are a quarter of T 1024 in three layers of
# four; the Adam rates nanochat's at 0.5M tokens a step.
PARTS="
align-documents           | --align-documents |
muon-qkv-split            | --muon-qkv split |
muon-qkv-head-pairs       | --muon-qkv head-pairs |
polar-express             | --muon-ns polar |
normuon                   | --normuon |
weight-decay              | --weight-decay 0.1 |
weight-decay-nanochat     | --weight-decay 0.05 --weight-decay-schedule linear |
cautious-weight-decay     | --cautious-weight-decay | weight-decay
wsd                       | --lr-schedule wsd --warmdown-frac 0.65 --min-lr-frac 0.05 |
momentum-warmup           | --momentum-warmup-steps 300 --momentum-start 0.85 |
momentum-nanochat         | --muon-momentum 0.97 --momentum-warmup-steps {stable} --momentum-start 0.85 --momentum-cooldown-steps {warmdown} --momentum-end 0.9 |
no-grad-clip              | --grad-clip 0 |
embedding-norm            | --embedding-norm 1 |
qk-scale                  | --qk-scale 1.2 |
residual-lambdas          | --residual-lambdas 1 |
rotary-base               | --rotary-base 100000 |
softcap-15                | --softcap 15 |
window-pattern            | --window-pattern 256,256,256,full |
value-embeddings          | --value-embeddings 1 |
smear                     | --smear 1 |
backout                   | --backout 1 |
nanochat-parts            | --value-embeddings 1 --smear 1 --backout 1 |
nanochat-init             | --init nanochat |
adam-betas                | --embedding-beta2 0.995 --head-beta2 0.96 |
adam-rates                | --embedding-lr 0.3 --head-lr 0.008 |
head-size-128             | --head-size 128 |
"
# The parts of the full set (MODE=out; {preset} of MODE=sets) when NEW_PRESET is not given: each
# part that gained alone on the H100, and the three parts of nanochat's model: at T 1024 the
# options of `--arch 2026` (gpt/config.h's row; bench/HISTORY.md, the 2026 recipe v2), spelled
# out so that MODE=out can take each away. value-embeddings, smear and backout stand together, so
# that MODE=out takes nanochat-parts out too.
NEW_PRESET_PARTS="muon-qkv-head-pairs normuon weight-decay wsd momentum-warmup embedding-norm qk-scale
residual-lambdas window-pattern value-embeddings smear backout"

# The sets of MODE=sets (and RACE_SET's): name | train_gpt options past the base's, {preset}
# standing for NEW_PRESET's options, {preset-dense} for them without --window-pattern (all
# attention full: the reference computes windows through a mask, off SDPA's flash kernel); nanochat's Adam rates and betas are those of its batch of
# 0.5M tokens, which served its model at this batch better than rates scaled down to it.
SETS="
candidate                    | {preset}
candidate-nanochat-init      | {preset} --init nanochat
candidate-nanochat-adam      | {preset} --embedding-lr 0.3 --head-lr 0.008 --embedding-beta2 0.995 --head-beta2 0.96
candidate-nanochat-init-adam | {preset} --init nanochat --embedding-lr 0.3 --head-lr 0.008 --embedding-beta2 0.995 --head-beta2 0.96
candidate-head-size-128      | {preset} --head-size 128
candidate-muon-lr-0.03       | {preset} --lr 0.03
candidate-muon-lr-0.04       | {preset} --lr 0.04
candidate-dense              | {preset-dense}
"

gpu_arguments 1 "$@"
DATA=${1:-}
[ -n "$DATA" ] || gpu_refuse "give the dataset folder"
MODE=${MODE:-alone}
case $MODE in alone|out|sets|race) ;; *) gpu_refuse "MODE $MODE: expected alone, out, sets or race" ;; esac
PYTHON=${PYTHON:-python3}
LOGS=build/recipe/$MODE
B=16 T=1024
RACE_SET=${RACE_SET-candidate candidate-dense}
RACE_BATCHES=${RACE_BATCHES:-16 64}
RACE_STEPS=${RACE_STEPS:-40}
RACE_WARMUP=${RACE_WARMUP:-10}

# table_rows TABLE NAMES OPTIONS [NEEDS]: the rows of TABLE ("name | options | needs" lines) into
# the array NAMES, in order, and the associative arrays OPTIONS (and NEEDS) by name.
table_rows() {
    local -n names=$2 options=$3
    local name opts needs
    while IFS='|' read -r name opts needs; do
        name=$(echo $name) opts=$(echo $opts) needs=$(echo $needs)
        [ -n "$name" ] || continue
        names+=("$name")
        options[$name]=$opts
        # shellcheck disable=SC2034  # needed names the caller's array
        [ -z "${4:-}" ] || { local -n needed=$4; needed[$name]=$needs; }
    done <<< "$1"
}
declare -A OPTIONS=() NEEDS=() SET_OPTIONS=()
NAMES=() SET_NAMES=()
table_rows "$PARTS" NAMES OPTIONS NEEDS
table_rows "$SETS" SET_NAMES SET_OPTIONS

# part_options NAME: the options of part NAME and of the part it needs, the latter first.
part_options() {
    local needs=${NEEDS[$1]}
    echo ${needs:+${OPTIONS[$needs]}} ${OPTIONS[$1]}
}

# The full set: NEW_PRESET, or the options of NEW_PRESET_PARTS; a name there that is no row is refused.
if [ -z "${NEW_PRESET:-}" ]; then
    NEW_PRESET=""
    for name in $NEW_PRESET_PARTS; do
        [ -n "${OPTIONS[$name]+set}" ] || gpu_refuse "NEW_PRESET_PARTS: no part called $name"
        NEW_PRESET="$NEW_PRESET ${OPTIONS[$name]}"
    done
fi

# The rows PARTS_FILTER picks of the mode's table (MODE=sets: SETS, else PARTS); a name or
# pattern that picks none is refused, and so is PARTS_FILTER under MODE=race, which runs RACE_SET.
if [ "$MODE" = sets ]; then ROWS=("${SET_NAMES[@]}") TABLE=SETS; else ROWS=("${NAMES[@]}") TABLE=PARTS; fi
SELECTED=()
if [ -n "$(printf %s ${PARTS_FILTER:-})" ]; then
    [ "$MODE" != race ] || gpu_refuse "PARTS_FILTER picks rows of MODE alone, out or sets; MODE=race runs RACE_SET"
    for pattern in $PARTS_FILTER; do
        picked=0
        for name in "${ROWS[@]}"; do
            # shellcheck disable=SC2254  # the pattern is one on purpose
            case $name in $pattern) picked=1 ;; esac
        done
        [ "$picked" = 1 ] || gpu_refuse "PARTS_FILTER: no row called $pattern (the rows of $TABLE at the top of $GPU_SCRIPT)"
    done
    for name in "${ROWS[@]}"; do
        for pattern in $PARTS_FILTER; do
            # shellcheck disable=SC2254
            case $name in $pattern) SELECTED+=("$name"); break ;; esac
        done
    done
else
    SELECTED=("${ROWS[@]}")
fi
if [ "$MODE" = race ]; then
    [ -n "$(printf %s $RACE_SET)" ] || gpu_refuse "RACE_SET is empty: nothing would be raced"
    for name in $RACE_SET; do
        [ "$name" = base ] || [ -n "${SET_OPTIONS[$name]+set}" ] ||
            gpu_refuse "RACE_SET: no set called $name (base, or a row of SETS at the top of $GPU_SCRIPT)"
    done
    [ -n "$(printf %s $RACE_BATCHES)" ] || gpu_refuse "RACE_BATCHES is empty: nothing would be raced"
    for batch in $RACE_BATCHES; do
        [[ $batch =~ ^[1-9][0-9]{0,3}$ ]] || gpu_refuse "RACE_BATCHES: $batch is not a batch size (1 to 9999)"
    done
    [[ $RACE_WARMUP =~ ^[0-9]{1,4}$ && $RACE_STEPS =~ ^[1-9][0-9]{0,4}$ ]] && [ "$RACE_STEPS" -gt "$RACE_WARMUP" ] ||
        gpu_refuse "RACE_STEPS $RACE_STEPS must be a count of steps above RACE_WARMUP $RACE_WARMUP"
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
# shellcheck disable=SC2046  # the words, one space apart
FULL=$(echo $(with_steps "$NEW_PRESET"))

# The full set at full attention: without its --window-pattern and the pattern.
# shellcheck disable=SC2001  # sed's pattern takes the option's value too
DENSE=$(echo "$FULL" | sed 's/ *--window-pattern [^ ]*//')

# set_options NAME: the options of set NAME (base: none), {preset} the full set's, {preset-dense}
# DENSE.
set_options() {
    [ "$1" = base ] && return
    local s=${SET_OPTIONS[$1]}
    s=${s//\{preset-dense\}/$DENSE}
    # shellcheck disable=SC2046  # the words, one space apart
    echo $(with_steps "${s//\{preset\}/$FULL}")
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
REFERENCE=base
case $MODE in
alone)
    for name in "${SELECTED[@]}"; do
        RUN_NAMES+=("with-$name")
        RUN_OPTIONS+=("$(with_steps "$(part_options "$name")")")
    done ;;
out)
    REFERENCE=full
    RUN_NAMES+=(full) RUN_OPTIONS+=("$FULL")
    echo "the full set: $FULL"
    for name in "${SELECTED[@]}"; do
        # Out goes the part, and with it each part that needs it.
        rest=$(without "$(with_steps "${OPTIONS[$name]}")" "$FULL") ||
            { echo "note: $name is not in the full set (${OPTIONS[$name]}): left out"; continue; }
        for other in "${NAMES[@]}"; do
            if [ "${NEEDS[$other]}" = "$name" ]; then rest=$(without "$(with_steps "${OPTIONS[$other]}")" "$rest") || true; fi
        done
        RUN_NAMES+=("without-$name") RUN_OPTIONS+=("$rest")
    done ;;
sets)
    echo "the candidate preset ({preset}): $FULL"
    for name in "${SELECTED[@]}"; do
        RUN_NAMES+=("$name") RUN_OPTIONS+=("$(set_options "$name")")
    done ;;
race)
    RUN_NAMES=() RUN_OPTIONS=()
    for name in $RACE_SET; do
        echo "raced, $name: $(set_options "$name")"
        case " $(set_options "$name") " in *" --window-pattern "*)
            echo "note: the reference computes $name's windows through a mask (SDPA off its flash kernel)" ;;
        esac
    done ;;
esac

# The estimate: each step about 30 ms (B 16; B 64 four times that), each validation batch 10 ms,
# 10 s to start a run of train_gpt and 60 s to start and compile one of torch.compile.
if [ "$MODE" = race ]; then
    runs=0 estimate=0
    for name in $RACE_SET; do
        for batch in $RACE_BATCHES; do
            runs=$(( runs + 2 ))
            estimate=$(( estimate + (2 * RACE_STEPS * 30 * batch / B + 70000) / 1000 ))
        done
    done
    echo "estimate: $runs runs (train_gpt and the reference of $(echo $RACE_SET) at B $(echo $RACE_BATCHES)) x $RACE_STEPS steps, about $estimate s past the build on an H100"
else
    runs=${#RUN_NAMES[@]}
    estimate=$(( runs * (STEPS * 30 + (STEPS / 25 + 1) * 20 * 10 + 10000) / 1000 ))
    echo "estimate: $runs runs x $STEPS steps, about $estimate s past the build on an H100"
fi
[ "$estimate" -le 450 ] ||
    echo "note: more than 450 s: with the build it may pass a call of 10 minutes; split the rows with PARTS_FILTER"

echo "== build ($(elapsed))"
gpu_build_train_gpt "$LOGS"

# The options of every run of the text: the base's, up to the data's.
COMMON=(--model d12 --arch modern --optimizer muon --context "$T" -T "$T" --warmup-steps "$WARMUP" --min-lr-frac 0.1
        --grad-clip 1 --seed 1 --train-data "$DATA/train_*.bin" --val-data "$DATA/val_*.bin"
        --tokenizer "$DATA/tokenizer.bin")

# keep_logs: the logs so far into $OUT/recipe-MODE.tar.gz, when OUT is set (one file, which a
# call cut short by its time limit still returns).
keep_logs() {
    [ -z "${OUT:-}" ] || { mkdir -p "$OUT" && tar -czf "$OUT/recipe-$MODE.tar.gz" -C build/recipe "$MODE"; } ||
        step_failed "the logs' archive"
}

# rate LOG BATCH: the K tokens/s of a run's log (train_gpt's CSV columns) at batch BATCH over its
# steps past RACE_WARMUP, or ? when it has none.
rate() {
    awk -F, -v skip="$RACE_WARMUP" -v tokens=$(( $2 * T )) '
        NR > 1 && $1 > skip { ms += $6; n++ }
        END { if (n && ms > 0) printf "%.1f", n * tokens / ms; else printf "?" }' "$1" 2> /dev/null || echo "?"
}

# The race: each set of RACE_SET at each batch, train_gpt then the reference, the same options and
# text, no validation.
race() {
    local name options batch table
    table="| set | T | B | train_gpt K tokens/s | torch.compile reference K tokens/s | train_gpt / reference | bar 1.2x |
|---|---|---|---|---|---|---|"
    for name in $RACE_SET; do
        options=$(set_options "$name")
        for batch in $RACE_BATCHES; do
            local flash=$LOGS/race-$name-train_gpt-B$batch torch=$LOGS/race-$name-torch-B$batch
            echo "== race: train_gpt $name, B $batch ($(elapsed))"
            rm -f "$flash.csv" "$torch.csv"
            # shellcheck disable=SC2086  # the set's options are words
            ./train_gpt "${COMMON[@]}" -B "$batch" --steps "$RACE_STEPS" --val-every 0 $options --log "$flash.csv" \
                > "$flash.out" 2>&1 || { tail -2 "$flash.out"; step_failed "race: train_gpt $name B $batch"; }
            echo "== race: the PyTorch reference of $name under torch.compile, B $batch ($(elapsed))"
            # shellcheck disable=SC2086
            "$PYTHON" scripts/train_torch_reference.py "${COMMON[@]}" -B "$batch" --steps "$RACE_STEPS" --val-every 0 \
                $options --compile --log "$torch.csv" > "$torch.out" 2>&1 ||
                { tail -2 "$torch.out"; step_failed "race: reference $name B $batch"; }
            grep -m1 "reference:" "$torch.out"
            keep_logs
            table="$table
$(awk -v set="$name" -v T="$T" -v b="$batch" -v f="$(rate "$flash.csv" "$batch")" -v r="$(rate "$torch.csv" "$batch")" '
                BEGIN {
                    ratio = (f + 0 > 0 && r + 0 > 0) ? f / r : 0
                    printf "| %s | %s | %s | %s | %s | %s | %s |", set, T, b, f == "?" ? f : f "K", r == "?" ? r : r "K",
                           ratio ? sprintf("%.3f", ratio) : "?", ratio ? (ratio >= 1.2 ? "met" : "missed") : "?"
                }')"
        done
    done
    echo "== the race ($(elapsed)): d12, tokens/s over steps $((RACE_WARMUP + 1))-$RACE_STEPS"
    printf '%s\n' "$table" | tee "$LOGS/race.md"
}

# The runs of the text, one epoch each, then their table against the reference run's final loss.
learning() {
    local i run options
    for i in "${!RUN_NAMES[@]}"; do
        run=${RUN_NAMES[$i]} options=${RUN_OPTIONS[$i]}
        echo "== $run: ${options:-(the base)} ($(elapsed))"
        rm -f "$LOGS/$run.csv"
        # shellcheck disable=SC2086  # the run's options are words
        ./train_gpt "${COMMON[@]}" -B "$B" --steps "$STEPS" --val-every 25 --val-batches 20 $options \
            --log "$LOGS/$run.csv" > "$LOGS/$run.out" 2>&1 || { tail -2 "$LOGS/$run.out"; step_failed "$run"; }
        keep_logs
    done

    echo "== the runs against the base's final validation loss ($(elapsed))"
    local logs=()
    for run in "${RUN_NAMES[@]}"; do [ -f "$LOGS/$run.csv" ] && logs+=("$LOGS/$run.csv"); done
    "$PYTHON" scripts/compare_curves.py --runs --baseline base ${logs[@]+"${logs[@]}"} > "$LOGS/curves.md" ||
        step_failed "table"
    # compare_curves' rows "| run | final | S of N | t of total | steps %, time % | K tokens/s |", as
    # the ablation table: each run against the reference run's final loss and ms per step; MODE=sets
    # adds the preset's bars.
    local bars_head="" bars_rule=""
    [ "$MODE" = sets ] && bars_head=" bars (≤ -0.6 nats, ≤ 50% steps, ≤ 55% time) |" bars_rule="---|"
    echo "| run | final val loss | Δ vs $REFERENCE | ms/step | Δ ms | step reaching base's final | share of base's steps, time |$bars_head"
    echo "|---|---|---|---|---|---|---|$bars_rule"
    awk -F'|' -v ref="$REFERENCE" -v tokens=$((B * T)) -v runs=" ${RUN_NAMES[*]} " -v bars="$bars_head" '
        { name = $2; gsub(/ /, "", name) }
        NF == 8 && index(runs, " " name " ") && !(name in final) {
            n++; names[n] = name; final[name] = $3 + 0; reach[name] = $4; share[name] = $6; gsub(/^ +| +$/, "", share[name])
            rate = $7; gsub(/[ K]/, "", rate); ms[name] = rate > 0 ? tokens / rate : 0
        }
        END {
            for (i = 1; i <= n; i++) {
                x = names[i]; split(reach[x], r, " of "); gsub(/^ +| +$/, "", r[1])
                d = (ref in final) ? sprintf("%+.4f", final[x] - final[ref]) : "-"
                dm = (ref in ms) && ms[x] > 0 && ms[ref] > 0 ? sprintf("%+.1f", ms[x] - ms[ref]) : "-"
                verdict = ""
                if (bars != "") {
                    split(share[x], s, ","); steps = s[1] + 0; time = s[2] + 0
                    met = share[x] != "" && (ref in final) && final[x] - final[ref] <= -0.6 && steps <= 50 && time <= 55
                    verdict = x == ref ? " |" : met ? " met |" : " missed |"
                }
                printf "| %s | %.4f | %s | %.1f | %s | %s | %s |%s\n", x, final[x], d, ms[x], dm, r[1], share[x], verdict
            }
        }' "$LOGS/curves.md" | tee "$LOGS/table.md"
    cat "$LOGS/curves.md"
}

if [ "$MODE" = race ]; then race; else learning; fi
keep_logs
echo "== done ($(elapsed)), logs in $LOGS${OUT:+ and $OUT/recipe-$MODE.tar.gz}"
gpu_finish
