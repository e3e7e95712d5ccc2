#!/usr/bin/env bash
# scripts/gpu/fp8.sh: the bars of the FP8 matmuls (train_gpt --fp8) and of the training step
# without host waits, on one GPU from the repository root, in parts that each fit a call of 10
# minutes (the estimates below are assumed step times, not measurements):
#   PARTS="test matmuls" bash scripts/gpu/fp8.sh                       (about 6 minutes)
#   PARTS=speed MODELS="d12 d24" bash scripts/gpu/fp8.sh                (about 3 minutes)
#   PARTS=speed MODELS=d48 bash scripts/gpu/fp8.sh                      (about 4 minutes)
#   PARTS=learning MODELS=d12 bash scripts/gpu/fp8.sh DATASET_DIR       (about 2 minutes)
#   PARTS=learning MODELS=d24 bash scripts/gpu/fp8.sh DATASET_DIR       (about 5 minutes)
#   PARTS=nowait bash scripts/gpu/fp8.sh '' BASELINE_DIR                (about 5 minutes)
# each past the build (one to two minutes from nothing). PARTS unset: test matmuls speed learning
# nowait, one after the other, with both folders. DATASET_DIR holds prepare_data's output
# (train_*.bin, val_*.bin, tokenizer.bin) of a real text of at least 5M tokens (`bash
# scripts/make_parity_text.sh python DIR` makes one; nothing is fetched), '' where the learning
# part does not run. BASELINE_DIR is a flashgpt tree from before the step without host waits
# (`mkdir .baseline && git archive c35a237 | tar -x -C .baseline`), built here.
# MODELS: the models of the learning part [d12 d24] and of the speed part [d12 d24 d48], of d12,
# d24, d36 and d48. Each part prints its estimated time first.
# test: tests/unit/layers/test_fp8 and tests/unit/train/test_batches, each alone and under
#   compute-sanitizer memcheck (at most SANITIZER_LIMIT_S, 300 s, each: a time-out is reported,
#   not failed), and tests/unit/gpt/test_gpt whole, its FP8 cases (resumes bit-exact, loss curves
#   against bf16) and its run reporting a step late printed.
# matmuls: build/bench/bench_matmul: the MLP's projections and the head of d12, d24 and d48,
#   bf16 against FP8 (current and delayed scaling), forward and backward, and per model what a
#   step's MLPs and head take in each path; its table printed whole. Then
#   build/bench/bench_fp8_algorithms: every candidate cuBLASLt's heuristic offers for the MLP's
#   forward product at those sizes, FP8 and bf16, timed (whether the first, the one taken, is
#   the fastest); its table printed whole.
# speed: GPT-2's recipe (train_gpt's defaults, AdamW) on random tokens of GPT-2's vocabulary
#   (scripts/random_tokens.py) at T 1024, STEPS (20) steps a run, each of: bf16, --fp8 mlp,head,
#   the same with --fp8-scaling delayed, --fp8 mlp, --fp8 head, --fp8 mlp,head --fp8-grad bf16.
#   d12 at B 16 and at B 64; a larger model at the batch that fills the GPU: the largest of
#   FILL_BATCHES (128 96 64 48 32 24 16 12 8 4 2 1) that train_gpt's memory check accepts for
#   --fp8 mlp,head (the run that takes the most memory), with --recompute gelu,layernorm when none
#   fits without; every run of that model at that batch. The table: tokens/s (train_gpt's done
#   line, the GPU's time of the steps past the first), the ratio to bf16's against the bars
#   (--fp8 mlp,head at least 1.25x bf16 at d24 and above, 1.05x at d12), MFU and peak memory.
# learning: paired runs of one epoch, B 16, T 1024, seed 1 (train_gpt draws the initial weights
#   and the data order from the seed alone: every run of a model and recipe starts from the same
#   weights and reads the same batches), warmup over the first 10% of the steps, a cosine to 0.1,
#   clip 1, validation on 20 batches every 100 steps and at the end: each model of MODELS with
#   GPT-2's recipe (AdamW at 6e-4, weight decay 0.1) and the modern one (--arch modern --optimizer
#   muon), each in bf16, with --fp8 mlp,head, and with --fp8 mlp,head --fp8-scaling delayed. The
#   table: each run's loss at step 1 (the same weights: nearly the same), its final validation
#   loss, FP8 minus bf16 against the bar (within 0.02 nats), its ms per step and that over bf16's.
# nowait: the wall time of a step, this tree against BASELINE_DIR, d12 at T 1024, B 16 and B 64,
#   GPT-2's recipe and the modern one with Muon, on the random tokens: each the difference between
#   the wall-clock times of a run of N1 and of N2 steps over N2 - N1 (what a run takes to start
#   cancels), N1 and N2 20 and 420 at B 16, 10 and 110 at B 64; this tree, the baseline, this tree
#   again (the two runs of this tree tell the noise), after a run that warms the GPU up. Only the
#   wall time compares the two: train_gpt's own step times are the GPU's (events) in this tree and
#   the host's in the baseline. The table: the ms per step of each, the baseline's over this
#   tree's, against the bars (at least 3% faster at B 16; no slower at B 64 beyond the noise).
# Logs go to $OUT/fp8 when OUT is set (packed at the end into $OUT/fp8-logs.tar.gz, the tables
# into $OUT/fp8-tables.md beside it), else build/fp8 (the tables in build/fp8-tables.md). Exits
# non-zero when a step fails, and its last line names the steps that did.
set -u
. "$(dirname "$0")/common.sh"
gpu_arguments 2 "$@"
DATA=${1:-}
gpu_parts "test matmuls speed learning nowait" test matmuls speed learning nowait
[ -z "$DATA" ] || gpu_dataset "$DATA"
BASELINE=$(gpu_baseline "${2:-}") || exit 1
part learning && [ -z "$DATA" ] && gpu_refuse "the learning part needs the dataset folder"
part nowait && [ -z "$BASELINE" ] && gpu_refuse "the nowait part needs BASELINE_DIR, a tree from before the step without host waits"
# The models MODELS may name, and the estimates' assumptions for each, not measurements: a run's
# start (the model drawn on the host) in seconds, and a bf16 step of GPT-2's recipe at B 16, T 1024
# and GPT-2's vocabulary on an H100 in ms (d12's 535K tokens/s, bench/RESULTS.md; the others by
# their FLOPs per token); the batch that fills an H100 of 80 GB; Muon's step 10% dearer than
# AdamW's.
declare -A START_S=([d12]=5 [d24]=8 [d36]=15 [d48]=30)
declare -A STEP_MS=([d12]=31 [d24]=85 [d36]=185 [d48]=370)
declare -A ASSUMED_FILL=([d24]=64 [d36]=32 [d48]=12)
if [ -n "${MODELS+set}" ]; then
    [ -n "$(printf %s $MODELS)" ] || gpu_refuse "MODELS is empty: nothing would be run"
    for model in $MODELS; do
        [ -n "${START_S[$model]+set}" ] || gpu_refuse "MODELS: no model called $model (d12, d24, d36, d48)"
    done
fi
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-20}
FILL_BATCHES=${FILL_BATCHES:-"128 96 64 48 32 24 16 12 8 4 2 1"}
SANITIZER_LIMIT_S=${SANITIZER_LIMIT_S:-300}
positive() { [[ $2 =~ ^[1-9][0-9]{0,5}$ ]] || gpu_refuse "$1 $2: expected a positive number"; }
positive STEPS "$STEPS"
positive SANITIZER_LIMIT_S "$SANITIZER_LIMIT_S"
for B in $FILL_BATCHES; do
    positive FILL_BATCHES "$B"
    [ "$B" -le 256 ] || gpu_refuse "FILL_BATCHES $B: at most 256 (the random tokens hold 256 sequences of T 1024)"
done
[ -n "$(printf %s $FILL_BATCHES)" ] || gpu_refuse "FILL_BATCHES is empty: no batch to try"
if [ -n "${OUT:-}" ]; then
    LOGS=$OUT/fp8 TABLES=$OUT/fp8-tables.md
    # The folder is packed and removed at the end: it must hold this run's logs alone.
    [ -z "$(ls -A "$LOGS" 2> /dev/null)" ] || gpu_refuse "$LOGS holds files already (this run's logs go there)"
else
    LOGS=build/fp8 TABLES=build/fp8-tables.md
fi
SHARDS=build/fp8-random
mkdir -p "$LOGS"
: > "$TABLES"

# The speed part's runs, in the table's order: name | train_gpt options.
SPEED_RUNS="
bf16          |
fp8           | --fp8 mlp,head
fp8-delayed   | --fp8 mlp,head --fp8-scaling delayed
fp8-mlp       | --fp8 mlp
fp8-head      | --fp8 head
fp8-bf16-grad | --fp8 mlp,head --fp8-grad bf16
"
declare -A SPEED_OPTIONS=()
SPEED_NAMES=()
while IFS='|' read -r name options; do
    name=$(echo $name)
    [ -n "$name" ] || continue
    SPEED_NAMES+=("$name")
    SPEED_OPTIONS[$name]=$(echo $options)
done <<< "$SPEED_RUNS"

# The learning part's recipes and FP8 settings (words, split where they are used).
declare -A RECIPE=([gpt2-adamw]="--optimizer adamw --lr 6e-4 --weight-decay 0.1"
                   [modern-muon]="--arch modern --optimizer muon")
declare -A LEARNING_FP8=([bf16]="" [fp8]="--fp8 mlp,head" [fp8-delayed]="--fp8 mlp,head --fp8-scaling delayed")

# table TITLE: prints stdin, the table, after its title, and keeps both in TABLES.
table() {
    { echo "$1"; cat; echo; } | tee -a "$TABLES"
}

# run_figures LOG: "K GIB GFLOP PEAK" from a train_gpt output: its done line's thousands of
# tokens/s and peak GiB, its MFU line's GFLOP per token (as the MFU counts them) and peak TFLOP/s;
# "-" for each it lacks.
run_figures() {
    awk '/^done: [0-9.]+K tokens\/s/ { k = $2; sub(/K$/, "", k); gib = $(NF - 1) }
         /^MFU: [0-9.e+-]+ GFLOP per token/ { gflop = $2; peak = $(NF - 1) }
         END { printf "%s %s %s %s\n", k == "" ? "-" : k, gib == "" ? "-" : gib, gflop == "" ? "-" : gflop,
                      peak == "" ? "-" : peak }' "$1"
}

# speed_table ROWS: the speed part's table from its rows (model, B, recompute 0 or 1, run name,
# its options, K tokens/s, peak GiB, GFLOP per token, peak TFLOP/s; tab-separated), each model and
# batch's runs in SPEED_NAMES' order against its bf16 run.
speed_table() {
    awk -F'\t' -v order="${SPEED_NAMES[*]}" '
        { key = $1 SUBSEP $2 SUBSEP $3
          if (!(key in seen)) { seen[key] = 1; keys[++n] = key; model[key] = $1; batch[key] = $2; rc[key] = $3 }
          options[key, $4] = $5; rate[key, $4] = $6; gib[key, $4] = $7; gflop[key, $4] = $8; peak[key, $4] = $9 }
        END {
            print "| model | B | run | tokens/s | × bf16 | bar | MFU | peak GiB |"
            print "|---|---|---|---|---|---|---|---|"
            runs = split(order, names, " ")
            for (i = 1; i <= n; i++) {
                key = keys[i]; base = rate[key, "bf16"]
                need = model[key] == "d12" ? 1.05 : 1.25
                for (j = 1; j <= runs; j++) {
                    r = names[j]
                    if (!((key, r) in rate)) continue
                    k = rate[key, r]
                    ratio = (k != "-" && base != "" && base != "-" && base > 0) ? k / base : ""
                    bar = "-"
                    if ((r == "fp8" || r == "fp8-delayed") && ratio != "")
                        bar = sprintf("≥ %.2f: %s", need, ratio >= need ? "yes" : "NO")
                    mfu = "-"
                    if (k != "-" && gflop[key, r] != "-" && peak[key, r] > 0)
                        mfu = sprintf("%.1f%%", 100 * gflop[key, r] * k / peak[key, r])
                    shown = ratio == "" ? "-" : sprintf("%.3f", ratio)
                    label = options[key, r] == "" ? "bf16" : options[key, r]
                    rate_k = k == "-" ? "-" : k "K"
                    printf "| %s | %s%s | %s | %s | %s | %s | %s | %s |\n", model[key], batch[key],
                           rc[key] ? " (recompute)" : "", label, rate_k, shown, bar, mfu, gib[key, r]
                }
            }
        }' "$1"
}

# learning_table CSV...: the learning part's table from the runs' logs, named
# MODEL.RECIPE.SETTING.csv: each run's loss at step 1, its final validation loss, FP8 minus bf16
# (the run MODEL.RECIPE.bf16) against the bar, its mean ms per step past the first and that over
# bf16's.
learning_table() {
    awk -F, '
        FNR == 1 { name = FILENAME; sub(/.*\//, "", name); sub(/\.csv$/, "", name); names[++n] = name; next }
        $1 == 1 { first[name] = $2 }
        $3 != "" { final[name] = $3 }
        $1 > 1 { ms[name] += $6; timed[name]++ }
        END {
            print "| model | recipe | run | loss at step 1 | final val loss | FP8 − bf16 | within 0.02 | ms/step | × bf16 ms |"
            print "|---|---|---|---|---|---|---|---|---|"
            for (i = 1; i <= n; i++) {
                x = names[i]; split(x, p, "."); base = p[1] "." p[2] ".bf16"
                step_ms = timed[x] ? ms[x] / timed[x] : 0
                base_ms = timed[base] ? ms[base] / timed[base] : 0
                diff = "-"; verdict = "-"
                if (p[3] != "bf16" && (x in final) && (base in final)) {
                    d = final[x] - final[base]
                    diff = sprintf("%+.4f", d); verdict = (d <= 0.02 && d >= -0.02) ? "yes" : "NO"
                }
                start = x in first ? sprintf("%.4f", first[x]) : "-"
                end = x in final ? sprintf("%.4f", final[x]) : "-"
                shown_ms = step_ms > 0 ? sprintf("%.1f", step_ms) : "-"
                ratio = step_ms > 0 && base_ms > 0 ? sprintf("%.3f", step_ms / base_ms) : "-"
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], p[3], start, end, diff, verdict,
                       shown_ms, ratio
            }
        }' "$@"
}

# nowait_table ROWS: the nowait part's table from its rows (recipe, B, tree, N1, its wall ms, N2,
# its wall ms; space-separated): each tree's ms per step, (t2 - t1) / (N2 - N1), the baseline's
# over this tree's mean, the two runs of this tree apart, the bar.
nowait_table() {
    awk '
        function shown(ms) { return ms > 0 ? sprintf("%.2f", ms) : "-" }
        { key = $1 " " $2; if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
          ms[key, $3] = $6 > $4 ? ($7 - $5) / ($6 - $4) : 0 }
        END {
            print "| recipe | B | this ms/step | baseline ms/step | this again ms/step | baseline / this | this tree'"'"'s runs apart | bar |"
            print "|---|---|---|---|---|---|---|---|"
            for (i = 1; i <= n; i++) {
                key = keys[i]; split(key, p, " ")
                a = ms[key, "this"]; b = ms[key, "baseline"]; c = ms[key, "this-again"]
                gain = ""; spread = ""; bar = "-"
                if (a > 0 && b > 0 && c > 0) {
                    mean = (a + c) / 2; gain = b / mean - 1; spread = (a > c ? a - c : c - a) / mean
                    if (p[2] == 16) bar = sprintf("≥ 3%% faster: %s", gain >= 0.03 ? "yes" : "NO")
                    else bar = sprintf("no slower: %s", gain >= -spread ? "yes" : "NO")
                }
                shown_gain = gain == "" ? "-" : sprintf("%.3f (%+.1f%%)", gain + 1, 100 * gain)
                shown_spread = spread == "" ? "-" : sprintf("%.1f%%", 100 * spread)
                printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], shown(a), shown(b), shown(c),
                       shown_gain, shown_spread, bar
            }
        }' "$1"
}

# The random tokens of the speed and nowait parts: enough for B 256 at T 1024.
random_shards() {
    [ -f "$SHARDS/random_000000.bin" ] && return 0
    "$PYTHON" scripts/random_tokens.py "$SHARDS/random_000000.bin" $((2 * 65536 * 2 + 1)) || step_failed "random tokens"
}

# memcheck NAME TEST ENV...: TEST (a path under build/tests/unit/) under compute-sanitizer memcheck
# with the variables ENV, at most SANITIZER_LIMIT_S; its output and exit status in NAME-memcheck.log.
# Fails on the tool's errors, the test's failures or no tool; a time-out is not a failure.
memcheck() {
    local name=$1 test=$2 sanitizer status
    shift 2
    sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    env "$@" timeout "$SANITIZER_LIMIT_S" "$sanitizer" --tool memcheck --error-exitcode 99 --print-limit 20 \
        "build/tests/unit/$test" > "$LOGS/$name-memcheck.log" 2>&1
    status=$?
    echo "exit status $status" >> "$LOGS/$name-memcheck.log"
    [ "$status" -eq 0 ] || [ "$status" -eq 124 ]
}

part_test() {
    local t name gen
    echo "== test: build; estimate a few minutes (test_gpt whole, the two sanitizers beside it; never timed) ($(elapsed))"
    if ! make -j"$(nproc)" build/tests/unit/layers/test_fp8 build/tests/unit/train/test_batches \
        build/tests/unit/gpt/test_gpt build/texts/tinyshakespeare.txt > "$LOGS/build-tests.log" 2>&1; then
        tail -20 "$LOGS/build-tests.log"; step_failed "test: build"; return
    fi
    for gen in tests/reference/gen_*.py; do
        "$PYTHON" "$gen" build/testdata >> "$LOGS/reference.log" 2>&1 || step_failed "test: $gen"
    done
    # The tests' data, scratch folder and text, as tests/run_tests.sh gives them.
    local vars=(FLASHGPT_TESTDATA=build/testdata FLASHGPT_TMP=build/fp8-testtmp FLASHGPT_TEXT=build/texts/tinyshakespeare.txt)
    rm -rf build/fp8-testtmp
    mkdir -p build/fp8-testtmp
    for t in layers/test_fp8 train/test_batches; do
        name=${t#*/}
        echo "== test: $name ($(elapsed))"
        env "${vars[@]}" "build/tests/unit/$t" > "$LOGS/$name.log" 2>&1 || step_failed "test: $name"
        grep -E '^(PASS|FAIL|SKIPPED|    also)' "$LOGS/$name.log"
    done
    # Both under memcheck meanwhile test_gpt runs, each in a scratch folder of its own.
    echo "== test: test_gpt, and test_fp8 and test_batches under memcheck beside it ($(elapsed))"
    local pids=()
    for t in layers/test_fp8 train/test_batches; do
        memcheck "${t#*/}" "$t" "${vars[@]}" &
        pids+=($!)
    done
    env "${vars[@]}" build/tests/unit/gpt/test_gpt > "$LOGS/test_gpt.log" 2>&1 || step_failed "test: test_gpt"
    grep -E '^(PASS|FAIL|SKIPPED) .*(fp8|late)|^FAIL' "$LOGS/test_gpt.log"
    grep -E '^    loss bf16' "$LOGS/test_gpt.log"
    echo "test_gpt: $(grep -c '^PASS ' "$LOGS/test_gpt.log") passed, $(grep -c '^FAIL ' "$LOGS/test_gpt.log") failed," \
        "$(grep -c '^SKIPPED ' "$LOGS/test_gpt.log") skipped"
    local i=0
    for t in layers/test_fp8 train/test_batches; do
        name=${t#*/}
        wait "${pids[$i]}" || step_failed "test: $name under memcheck"
        i=$((i + 1))
        grep -q '^exit status 124$' "$LOGS/$name-memcheck.log" &&
            echo "$name under memcheck: timed out after $SANITIZER_LIMIT_S s (not failed)"
        grep -E '(ERROR SUMMARY|^FAIL)' "$LOGS/$name-memcheck.log" | sed "s/^/$name under memcheck: /"
    done
}

part_matmuls() {
    echo "== matmuls: bench_matmul and bench_fp8_algorithms (about two minutes) ($(elapsed))"
    if ! make -j"$(nproc)" build/bench/bench_matmul build/bench/bench_fp8_algorithms > "$LOGS/build-bench.log" 2>&1
    then
        tail -20 "$LOGS/build-bench.log"; step_failed "matmuls: build"; return
    fi
    local bench
    for bench in bench_matmul bench_fp8_algorithms; do
        build/bench/$bench > "$LOGS/$bench.log" 2>&1 || step_failed "matmuls: $bench"
        grep -qi "skipped" "$LOGS/$bench.log" && step_failed "matmuls: $bench skipped"
    done
    table "bench_matmul: a linear layer's ms, bf16 against FP8 ($(elapsed))" < "$LOGS/bench_matmul.log"
    table "bench_fp8_algorithms: the heuristic's candidates for the MLP's forward product ($(elapsed))" \
        < "$LOGS/bench_fp8_algorithms.log"
}

# speed_run MODEL B RECOMPUTE NAME: one run of the speed part (run NAME's options, with
# --recompute gelu,layernorm when RECOMPUTE is 1), its figures added to the table's rows. Exit
# status 2 when the batch does not fit in memory (nothing recorded), 1 when the run failed.
speed_run() {
    local model=$1 B=$2 recompute=$3 name=$4 log extra=
    [ "$recompute" = 1 ] && extra="--recompute gelu,layernorm"
    log=$LOGS/speed-$model-B$B${extra:+-recompute}-$name.log
    # shellcheck disable=SC2086  # the options are words
    if ./train_gpt --model "$model" --context 1024 -T 1024 -B "$B" --steps "$STEPS" $extra ${SPEED_OPTIONS[$name]} \
        --train-data "$SHARDS/random_*.bin" --val-data '' > "$log" 2>&1; then
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$B" "$recompute" "$name" "${SPEED_OPTIONS[$name]}" \
            "$(run_figures "$log" | tr ' ' '\t')" >> "$LOGS/speed.rows"
        return 0
    fi
    grep -qE "does not fit in GPU memory|CUDA: out of memory" "$log" && return 2
    tail -2 "$log"
    step_failed "speed: $model B $B $name"
    return 1
}

part_speed() {
    local models=${MODELS:-"d12 d24 d48"} model B name estimate=0 recompute fill status label
    for model in $models; do
        if [ "$model" = d12 ]; then
            estimate=$(( estimate + 6 * (2 * START_S[d12] + STEPS * STEP_MS[d12] * 5 / 1000) ))
        else
            local probes=0
            for B in $FILL_BATCHES; do [ "$B" -gt "${ASSUMED_FILL[$model]}" ] && probes=$((probes + 1)); done
            estimate=$(( estimate + 3 * probes + 6 * (START_S[$model] + STEPS * STEP_MS[$model] * ASSUMED_FILL[$model] / 16 / 1000) ))
        fi
    done
    echo "== speed: $models, $STEPS steps a run; estimate about $estimate s on an H100 (assumed step times and batches) ($(elapsed))"
    random_shards
    rm -f "$LOGS/speed.rows"
    for model in $models; do
        if [ "$model" = d12 ]; then
            for B in 16 64; do
                for name in "${SPEED_NAMES[@]}"; do
                    echo "== speed: d12 B $B $name ($(elapsed))"
                    speed_run d12 "$B" 0 "$name"
                    [ $? = 2 ] && step_failed "speed: d12 B $B $name does not fit"
                done
            done
            continue
        fi
        # The batch that fills the GPU: the largest that --fp8 mlp,head fits, whose run is that run.
        fill=
        for recompute in 0 1; do
            label=; [ "$recompute" = 1 ] && label=" (recompute)"
            for B in $FILL_BATCHES; do
                echo "== speed: $model B $B$label fp8, the batch that fills the GPU ($(elapsed))"
                speed_run "$model" "$B" "$recompute" fp8
                [ $? = 2 ] || { fill=$B; break 2; }
            done
        done
        [ -n "$fill" ] || { step_failed "speed: $model fits at no batch"; continue; }
        for name in "${SPEED_NAMES[@]}"; do
            [ "$name" = fp8 ] && continue
            echo "== speed: $model B $fill$label $name ($(elapsed))"
            speed_run "$model" "$fill" "$recompute" "$name"
            status=$?
            [ "$status" = 2 ] && step_failed "speed: $model B $fill $name does not fit"
        done
    done
    [ -f "$LOGS/speed.rows" ] || : > "$LOGS/speed.rows"
    speed_table "$LOGS/speed.rows" | table "speed: GPT-2's recipe on random tokens, T 1024, $STEPS steps a run; tokens/s \
of the steps past the first (the GPU's time); MFU: train_gpt's FLOPs per token (gpt/mfu.h: 6 a weight, the attention's \
12 L C T) times tokens/s over the dense bf16 peak of its MFU line, the FP8 matmuls' FLOPs counted at half there, that is \
against twice the bf16 peak, FP8's ($(elapsed))"
    [ "${PIPESTATUS[0]}" = 0 ] || step_failed "speed: table"
}

part_learning() {
    local B=16 T=1024 tokens steps warmup models=${MODELS:-"d12 d24"} model recipe setting run estimate=0
    tokens=$(gpu_training_tokens "$DATA")
    steps=$(( (${tokens:-0} - 1) / T / B ))
    warmup=$(( steps / 10 ))
    echo "data: $DATA, ${tokens:-?} training tokens: one epoch is $steps steps of B $B, T $T"
    [ "${tokens:-0}" -ge 5000000 ] || echo "note: fewer than 5M training tokens"
    # Each run: its start, its steps and 20 validation batches (a third of a step each) every 100
    # steps and at the end, half the runs under Muon.
    for model in $models; do
        estimate=$(( estimate + 6 * (START_S[$model] + (steps + (steps / 100 + 1) * 20 / 3) * STEP_MS[$model] * 105 / 100000) ))
    done
    echo "== learning: $models, 6 runs each; estimate about $estimate s on an H100 (assumed step times) ($(elapsed))"
    [ "$estimate" -le 480 ] || echo "note: more than 8 minutes: run one model of MODELS a call"
    local common=(--context "$T" -T "$T" -B "$B" --steps "$steps" --warmup-steps "$warmup" --min-lr-frac 0.1 --grad-clip 1
                  --seed 1 --val-every 100 --val-batches 20 --train-data "$DATA/train_*.bin" --val-data "$DATA/val_*.bin"
                  --tokenizer "$DATA/tokenizer.bin")
    local logs=()
    for model in $models; do
        for recipe in gpt2-adamw modern-muon; do
            for setting in bf16 fp8 fp8-delayed; do
                run=$model.$recipe.$setting
                echo "== learning: $model $recipe ${LEARNING_FP8[$setting]:-bf16} ($(elapsed))"
                rm -f "$LOGS/$run.csv"
                # shellcheck disable=SC2086  # the options are words
                if ./train_gpt --model "$model" "${common[@]}" ${RECIPE[$recipe]} ${LEARNING_FP8[$setting]} \
                    --log "$LOGS/$run.csv" > "$LOGS/$run.out" 2>&1; then
                    [ -f "$LOGS/$run.csv" ] && logs+=("$LOGS/$run.csv")
                else
                    tail -2 "$LOGS/$run.out"; step_failed "learning: $run"
                fi
            done
        done
    done
    learning_table ${logs[@]+"${logs[@]}"} < /dev/null | table "learning: one epoch of $DATA ($steps steps of B $B, \
T $T, seed 1), FP8 against bf16 of the same model and recipe ($(elapsed))"
    [ "${PIPESTATUS[0]}" = 0 ] || step_failed "learning: table"
}

# wall_ms LOG COMMAND...: runs COMMAND (its output in LOG) and prints its wall-clock milliseconds;
# exit status 1, nothing printed, when it fails.
wall_ms() {
    local log=$1 start end
    shift
    start=$(date +%s%N)
    "$@" > "$log" 2>&1 || return 1
    end=$(date +%s%N)
    echo $(( (end - start) / 1000000 ))
}

part_nowait() {
    local recipe B tree program n1 n2 t1 t2 options estimate
    # Each recipe and tree: four starts, 440 steps at B 16 and 120 at B 64 (four times dearer).
    estimate=$(( 2 * 3 * (4 * START_S[d12] + (440 * STEP_MS[d12] + 120 * 4 * STEP_MS[d12]) * 105 / 100000) ))
    echo "== nowait: d12, this tree against $BASELINE; estimate about $estimate s on an H100 (assumed step times) ($(elapsed))"
    random_shards
    local train=(--model d12 --context 1024 -T 1024 --train-data "$SHARDS/random_*.bin" --val-data '')
    ./train_gpt "${train[@]}" -B 16 --steps 5 > "$LOGS/nowait-warmup.log" 2>&1 || step_failed "nowait: warm-up run"
    rm -f "$LOGS/nowait.rows"
    for recipe in gpt2-adamw modern-muon; do
        options=; [ "$recipe" = modern-muon ] && options="--arch modern --optimizer muon"
        for B in 16 64; do
            n1=20 n2=420; [ "$B" = 64 ] && n1=10 n2=110
            for tree in this baseline this-again; do
                program=./train_gpt; [ "$tree" = baseline ] && program=$BASELINE/train_gpt
                echo "== nowait: $recipe B $B, $tree: $n1 and $n2 steps ($(elapsed))"
                local log=$LOGS/nowait-$recipe-B$B-$tree
                # shellcheck disable=SC2086  # the options are words
                t1=$(wall_ms "$log-$n1.log" "$program" "${train[@]}" -B "$B" --steps "$n1" $options) &&
                    t2=$(wall_ms "$log-$n2.log" "$program" "${train[@]}" -B "$B" --steps "$n2" $options) ||
                    { tail -2 "$log-$n1.log" "$log-$n2.log" 2> /dev/null; step_failed "nowait: $recipe B $B $tree"; continue; }
                echo "$recipe $B $tree $n1 $t1 $n2 $t2" >> "$LOGS/nowait.rows"
            done
        done
    done
    [ -f "$LOGS/nowait.rows" ] || : > "$LOGS/nowait.rows"
    nowait_table "$LOGS/nowait.rows" | table "nowait: the wall time of a d12 step at T 1024, (a run of N2 steps - a run \
of N1) / (N2 - N1), N1 and N2 20 and 420 at B 16, 10 and 110 at B 64, this tree against $BASELINE ($(elapsed))"
    [ "${PIPESTATUS[0]}" = 0 ] || step_failed "nowait: table"
}

# The build: train_gpt for every part but the matmuls, the baseline's beside it.
baseline_pid=
if part nowait; then
    make -C "$BASELINE" -j"$(nproc)" train_gpt > "$LOGS/build-baseline.log" 2>&1 &
    baseline_pid=$!
fi
for part in $PARTS; do
    [ "$part" = matmuls ] && continue
    echo "== build ($(elapsed))"
    gpu_build_train_gpt "$LOGS"
    break
done
if [ -n "$baseline_pid" ] && ! wait "$baseline_pid"; then
    tail -20 "$LOGS/build-baseline.log"
    step_failed "baseline build"
    PARTS=${PARTS/nowait/}
fi

for part in $PARTS; do "part_$part"; done
echo "== done ($(elapsed)), logs in $LOGS, tables in $TABLES"
if [ -n "${OUT:-}" ]; then
    tar -czf "$OUT/fp8-logs.tar.gz" -C "$OUT" fp8 && rm -r "$LOGS" || step_failed "packing the logs"
fi
gpu_finish
