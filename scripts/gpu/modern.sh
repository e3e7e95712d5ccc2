#!/usr/bin/env bash
# scripts/gpu/modern.sh: the bars of the modern recipe on one GPU, from the repository root,
# in parts of a few minutes each on an H200 (learning and speed fit one call of 10 minutes):
#   PARTS=learning bash scripts/gpu/modern.sh DATASET_DIR
#   PARTS=speed bash scripts/gpu/modern.sh                   (no dataset)
#   PARTS=profile bash scripts/gpu/modern.sh                 (no dataset; about a minute)
# (PARTS unset: learning and speed, one after the other.) DATASET_DIR holds prepare_data's output
# (train_*.bin, val_*.bin, tokenizer.bin) of a real text of at least 5M tokens (`bash
# scripts/make_parity_text.sh python DIR` makes one; nothing is fetched). The recipes:
#   gpt2-adamw    GPT-2's architecture, AdamW at lr 6e-4 (its best at d12 on that text,
#                 bench/RESULTS.md, optimizers), weight decay 0.1;
#   modern-muon   --arch modern with Muon at the preset's defaults (lr 0.02 for the matrices, Adam
#                 at 0.05 for wte and 0.002 for the head, no weight decay);
#   modern-adamw  --arch modern with AdamW at the preset's lr 2e-3, weight decay 0.1.
# learning: d12, B 16, T 1024, one epoch of the text, seed 1, warmup over the first 10% of the
# steps, a cosine to 0.1, clip 1, validation on 20 batches every 25 steps, one run at a time: the
# three recipes in train_gpt, then modern-muon in PyTorch under torch.compile
# (scripts/train_torch_reference.py --compile, from train_gpt's initial weights of the seed and
# its data order). It prints two tables:
#   the learning bar (scripts/compare_curves.py --runs): each train_gpt run's final validation
#   loss, the step and the training time (validation excluded) at which its curve reaches
#   gpt2-adamw's final loss, and their shares of gpt2-adamw's steps and time. The bars: modern-muon ends at
#   least 0.9 nats below gpt2-adamw, and gets there in at most 30% of its steps and a third of its
#   time;
#   the time to gpt2-adamw's final loss (scripts/compare_curves.py): the step at which each curve
#   reaches it times its seconds a step (the mean past the first, which compiles). The bar:
#   flashgpt's modern-muon at least 1.15x as soon as torch.compile's.
# speed: d12 on random tokens of GPT-2's vocabulary at T 1024 (B 64) and T 16 384 (B 4), STEPS
# (20) steps each: the three recipes in train_gpt, and modern-muon in PyTorch
# (scripts/bench_torch_gpt2.py --arch modern --optimizer muon: torch.compile, SDPA; 3 warm-up
# steps). It prints the table of tokens/s. The bars: train_gpt's modern-muon at least 0.95x its
# gpt2-adamw and at least 1.15x torch.compile's modern-muon.
# profile: where the step's time goes, d12 on the same random tokens at T 1024, B 64, 10 steps:
# train_gpt's --profile table of its third step (each part against its floor; gpt/profile.h) for
# each recipe, one after the other.
# Logs go to $OUT/modern when OUT is set, else build/modern. Exits non-zero when a step fails, and
# its last line names the steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 1 "$@"
DATA=${1:-}
gpu_parts "learning speed" learning speed profile
! part learning || [ -n "$DATA" ] || gpu_refuse "the learning part needs the dataset folder"
[ -z "$DATA" ] || gpu_dataset "$DATA"
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-20}
LOGS=${OUT:-build}/modern
mkdir -p "$LOGS"

# The recipes' train_gpt options (words, split where they are used).
declare -A RECIPE=([gpt2-adamw]="--optimizer adamw --lr 6e-4 --weight-decay 0.1"
                   [modern-muon]="--arch modern --optimizer muon"
                   [modern-adamw]="--arch modern --optimizer adamw")
RECIPES="gpt2-adamw modern-muon modern-adamw"

echo "== build ($(elapsed))"
gpu_build_train_gpt "$LOGS"

learning() {
    local B=16 T=1024 tokens epoch warmup recipe
    tokens=$(gpu_training_tokens "$DATA")
    epoch=$(( (tokens - 1) / T / B ))
    warmup=$(( epoch / 10 ))
    echo "data: $DATA, $tokens training tokens: one epoch is $epoch steps of B $B, T $T"
    [ "${tokens:-0}" -ge 5000000 ] || echo "note: fewer than 5M training tokens"
    local common=(--model d12 --context "$T" -T "$T" -B "$B" --steps "$epoch" --warmup-steps "$warmup" --min-lr-frac 0.1
                  --grad-clip 1 --seed 1 --val-every 25 --val-batches 20 --train-data "$DATA/train_*.bin"
                  --val-data "$DATA/val_*.bin")
    for recipe in $RECIPES; do
        echo "== learning: train_gpt $recipe ($(elapsed))"
        rm -f "$LOGS/$recipe.csv"
        ./train_gpt "${common[@]}" --tokenizer "$DATA/tokenizer.bin" ${RECIPE[$recipe]} --log "$LOGS/$recipe.csv" \
            > "$LOGS/$recipe.out" 2>&1 || { tail -2 "$LOGS/$recipe.out"; step_failed "learning: $recipe"; }
        grep -E "^(model|optimizer):" "$LOGS/$recipe.out"
    done
    echo "== learning: modern-muon in PyTorch, torch.compile, from train_gpt's initial weights ($(elapsed))"
    local init=$LOGS/init-modern-s1.bin torch_log=$LOGS/torch-compile-modern-muon
    rm -f "$torch_log.csv"
    ./train_gpt "${common[@]}" ${RECIPE[modern-muon]} --save-init "$init" > "$LOGS/init.out" 2>&1 ||
        { tail -2 "$LOGS/init.out"; step_failed "learning: initial weights"; }
    "$PYTHON" scripts/train_torch_reference.py "${common[@]}" ${RECIPE[modern-muon]} --init-from "$init" --compile \
        --log "$torch_log.csv" > "$torch_log.out" 2>&1 || { tail -2 "$torch_log.out"; step_failed "learning: torch"; }
    grep -m1 "reference:" "$torch_log.out"
    rm -f "$init"

    echo "== the learning bar: the runs against gpt2-adamw's final validation loss ($(elapsed))"
    local logs=()
    for recipe in $RECIPES; do [ -f "$LOGS/$recipe.csv" ] && logs+=("$LOGS/$recipe.csv"); done
    "$PYTHON" scripts/compare_curves.py --runs --baseline gpt2-adamw ${logs[@]+"${logs[@]}"} | tee "$LOGS/learning.md"
    [ "${PIPESTATUS[0]}" = 0 ] || step_failed "learning table"

    echo "== the time to gpt2-adamw's final loss ($(elapsed))"
    "$PYTHON" scripts/compare_curves.py gpt2-adamw "$LOGS/gpt2-adamw.csv" modern-muon "$LOGS/modern-muon.csv" \
        torch.compile-modern-muon "$torch_log.csv" > "$LOGS/time_to_loss.out" 2>&1 || step_failed "time-to-loss table"
    # compare_curves' lines "  NAME: step S x M ms (...) = X s, ..." (or "NAME: not reached ..."),
    # as a table: each time (S x M) against gpt2-adamw's and torch.compile's.
    sed -n '/^to validation loss/,/^$/p' "$LOGS/time_to_loss.out" | awk '
        /^to validation loss/ { print "target: " $4 " (gpt2-adamw'"'"'s final validation loss)"; next }
        /: step [0-9]+ x / { name = $1; sub(":", "", name)
                             n++; names[n] = name; step[name] = $3; ms[name] = $5; t[name] = $3 * $5 / 1000; next }
        /: not reached/ { name = $1; sub(":", "", name); n++; names[n] = name; step[name] = "not reached" }
        END {
            print "| recipe | step reaching it | ms per step | seconds to it | gpt2-adamw'"'"'s time / this | torch.compile modern-muon'"'"'s time / this |"
            print "|---|---|---|---|---|---|"
            g = ("gpt2-adamw" in ms) ? t["gpt2-adamw"] : ""
            c = ("torch.compile-modern-muon" in ms) ? t["torch.compile-modern-muon"] : ""
            for (i = 1; i <= n; i++) {
                x = names[i]
                if (x in ms) printf "| %s | %s | %s | %.2f | %s | %s |\n", x, step[x], ms[x], t[x],
                                   g != "" ? sprintf("%.2f", g / t[x]) : "-", c != "" ? sprintf("%.2f", c / t[x]) : "-"
                else printf "| %s | %s | | | | |\n", x, step[x]
            }
        }' | tee "$LOGS/time_to_loss.md"
}

# The speed and profile parts' shards: random tokens of GPT-2's vocabulary.
random_shards() {
    mkdir -p build/speed-race-data
    "$PYTHON" scripts/random_tokens.py build/speed-race-data/random_000000.bin $((2 * 65536 * 2 + 1)) ||
        step_failed "random tokens"
}

speed() {
    local shards=build/speed-race-data shape T B recipe
    random_shards
    local table="| T | B |"
    for recipe in $RECIPES; do table="$table train_gpt $recipe tokens/s |"; done
    table="$table torch.compile modern-muon tokens/s | modern-muon / gpt2-adamw | modern-muon / torch.compile |"
    for shape in 1024:64 16384:4; do
        T=${shape%:*} B=${shape#*:}
        local row="| $T | $B |"
        declare -A rate=()
        for recipe in $RECIPES; do
            echo "== speed: train_gpt $recipe T $T B $B ($(elapsed))"
            local log=$LOGS/speed-$recipe-T$T.log
            ./train_gpt --model d12 --context "$T" -T "$T" -B "$B" --steps "$STEPS" ${RECIPE[$recipe]} \
                --train-data "$shards/random_*.bin" --val-data '' > "$log" 2>&1 ||
                { tail -2 "$log"; step_failed "speed: $recipe T $T"; }
            rate[$recipe]=$(sed -n 's/^done: \([0-9.]*\)K tokens.s.*/\1/p' "$log")
            row="$row ${rate[$recipe]:-?}K |"
        done
        echo "== speed: torch.compile modern-muon T $T B $B ($(elapsed))"
        local log=$LOGS/speed-torch-compile-modern-muon-T$T.log
        "$PYTHON" scripts/bench_torch_gpt2.py --arch modern --optimizer muon -B "$B" -T "$T" --steps "$STEPS" --warmup 3 \
            > "$log" 2>&1 || { tail -2 "$log"; step_failed "speed: torch T $T"; }
        local torch_rate
        torch_rate=$(sed -n 's/.*: \([0-9.]*\)K tokens.s .*/\1/p' "$log")
        row="$row ${torch_rate:-?}K | $(awk -v a="${rate[modern-muon]}" -v b="${rate[gpt2-adamw]}" -v c="$torch_rate" '
            function ratio(x, y) { return (x != "" && y + 0 > 0) ? sprintf("%.3f", x / y) : "?" }
            BEGIN { printf "%s | %s |", ratio(a, b), ratio(a, c) }')"
        table="$table
$row"
    done
    echo "== the speed bar ($(elapsed)): d12 on random tokens, $STEPS steps"
    printf '%s\n' "$table" | sed '1a|---|---|---|---|---|---|---|---|' | tee "$LOGS/speed.md"
}

profile() {
    local recipe log
    random_shards
    for recipe in $RECIPES; do
        echo "== profile: train_gpt $recipe, T 1024, B 64 ($(elapsed))"
        log=$LOGS/profile-$recipe.log
        ./train_gpt --model d12 --context 1024 -T 1024 -B 64 --steps 10 --profile 3 ${RECIPE[$recipe]} \
            --train-data "build/speed-race-data/random_*.bin" --val-data '' > "$log" 2>&1 ||
            { tail -2 "$log"; step_failed "profile: $recipe"; continue; }
        sed -n '/^profile of step/,/floors add up/p' "$log"
    done
}

for part in $PARTS; do "$part"; done
echo "== done ($(elapsed)), logs in $LOGS"
gpu_finish
