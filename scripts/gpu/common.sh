# scripts/gpu/common.sh: what the scripts beside it share, sourced by each (not run):
# their command line (-h or --help prints the script's opening comment, its usage; an unknown
# option, an argument too many or a run from another folder than the repository root, whose
# paths they use, is refused with one line, before any work) and their exit status (each step
# that fails is recorded; gpu_finish names them and exits non-zero); their elapsed time and the
# build of train_gpt; the baseline tree some of
# them compare with; the dataset folder some of them read; and the model the generation checks
# run on.

GPU_FAILED_STEPS=""

# The script's name in its messages.
GPU_SCRIPT=scripts/gpu/$(basename "$0")

# The script's progress lines say how long it has run: elapsed prints the seconds since it began.
GPU_START=$(date +%s)
elapsed() { echo "$(( $(date +%s) - GPU_START )) s"; }

# gpu_build_train_gpt LOGS: builds train_gpt (its output in LOGS/build.log); on failure prints the
# end of that output and exits.
gpu_build_train_gpt() {
    make -j"$(nproc)" train_gpt > "$1/build.log" 2>&1 || { tail -20 "$1/build.log"; exit 1; }
}

# gpu_refuse MESSAGE: refuses in one line naming the script (exit status 1).
gpu_refuse() {
    echo "error: $GPU_SCRIPT: $1 (--help prints the usage)" >&2
    exit 1
}

# gpu_parts "DEFAULT" PART...: PARTS (unset: DEFAULT) checked against the script's parts, in their
# order; empty, or naming another part, is refused. part NAME says whether PARTS holds NAME.
gpu_parts() {
    local default=$1 p
    shift
    PARTS=${PARTS-$default}
    [ -n "$(printf %s $PARTS)" ] || gpu_refuse "PARTS is empty: nothing would be run"
    for p in $PARTS; do
        case " $* " in *" $p "*) ;; *) gpu_refuse "PARTS: no part called $p ($(echo "$*" | sed 's/ /, /g'))" ;; esac
    done
}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# The script's opening comment, without its '#'s.
gpu_usage() {
    sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"
}

# gpu_arguments MAX "$@": handles -h / --help and refuses options, more than MAX arguments and
# a current folder other than the repository root.
gpu_arguments() {
    local max=$1 arg
    shift
    for arg in "$@"; do
        case "$arg" in -h|--help) gpu_usage; exit 0 ;; esac
    done
    for arg in "$@"; do
        case "$arg" in
            -*) gpu_refuse "unknown option $arg" ;;
        esac
    done
    if [ $# -gt "$max" ]; then
        shift "$max"
        gpu_refuse "unexpected argument '$1'"
    fi
    local root
    root=$(cd "$(dirname "$0")/../.." && pwd -P)
    [ "$(pwd -P)" = "$root" ] || gpu_refuse "run it from the repository root, $root"
}

# gpu_baseline DIR: prints DIR, a flashgpt tree to compare with ("" for none), or refuses it in
# one line (exit status 1).
gpu_baseline() {
    [ -z "$1" ] || [ -f "$1/Makefile" ] || gpu_refuse "BASELINE_DIR $1 is not a flashgpt tree (it has no Makefile)"
    echo "$1"
}

# gpu_generation_model DIR TEXT LOGS [ARCH]: the models of the generation checks, d12 (L12 C768
# NH12) on TEXT's 8192-token BPE in DIR/data, a context of 16 384, two steps: GPT-2's in
# DIR/run/model_00000002.bin, and with ARCH (train_gpt's --arch) one of that architecture in
# DIR/run-ARCH/model_00000002.bin; a step that fails is recorded.
gpu_generation_model() {
    local dir=$1 text=$2 logs=$3 arch run
    rm -rf "$dir"
    ./prepare_data --vocab-size 8192 --split-blank-lines --out-dir "$dir/data" "$text" > "$logs/generate-prepare.log" 2>&1 ||
        step_failed "generation model: prepare_data"
    for arch in gpt2 ${4:-}; do
        run=run-$arch
        [ "$arch" = gpt2 ] && run=run
        ./train_gpt --model d12 --arch "$arch" --context 16384 -B 8 -T 1024 --steps 2 --train-data "$dir/data/train_*.bin" \
            --val-every 0 --tokenizer "$dir/data/tokenizer.bin" --out-dir "$dir/$run" > "$logs/generate-train-$arch.log" 2>&1 ||
            { tail -3 "$logs/generate-train-$arch.log"; step_failed "generation model: train_gpt --arch $arch"; }
    done
}

# gpu_training_tokens DIR: the tokens of prepare_data's train_*.bin shards in DIR (the counts in
# their headers), through $PYTHON's numpy.
gpu_training_tokens() {
    "${PYTHON:-python3}" -c 'import glob, sys
import numpy as np
print(sum(int(np.fromfile(p, dtype=np.int32, count=3)[2]) for p in glob.glob(sys.argv[1] + "/train_*.bin")))' "$1"
}

# gpu_dataset DIR: refuses in one line (exit status 1) a DIR that is not prepare_data's output
# with validation shards (tokenizer.bin, train_*.bin, val_*.bin).
gpu_dataset() {
    [ -f "$1/tokenizer.bin" ] && ls "$1"/train_*.bin > /dev/null 2>&1 && ls "$1"/val_*.bin > /dev/null 2>&1 && return 0
    gpu_refuse "$1: no tokenizer.bin, train_*.bin and val_*.bin (prepare_data's output)"
}

# step_failed NAME: records that the step NAME failed.
step_failed() {
    GPU_FAILED_STEPS="${GPU_FAILED_STEPS:+$GPU_FAILED_STEPS, }$1"
}

# Ends the script: exit status 1 with a line naming the failed steps, 0 when none failed.
gpu_finish() {
    if [ -n "$GPU_FAILED_STEPS" ]; then
        echo "failed steps: $GPU_FAILED_STEPS"
        exit 1
    fi
    exit 0
}
