#!/usr/bin/env bash
# tests/programs/test_train_gpt_inputs.sh: train_gpt and generate against bad inputs that must stop them
# with one line before the GPU is touched: checkpoints of a --resume folder or --init-from that
# are truncated, empty, random, of another shape, with values that are not finite or headers
# whose sizes overflow; --log and --out-dir that cannot be written, a --log that is an input;
# flags out of range; --align-documents without a tokenizer, without documents or resumed with
# another alignment; Muon's variants out of place, out of range or resumed otherwise; --fp8 and its
# settings out of place, out of range or resumed otherwise, its state truncated or not finite; --init,
# the Adam groups' own betas and --head-size, drawn, refused and resumed.
# Also which validation shards the default --val-data finds, and that it says
# when there are none. The checkpoints are made here (ckpt.py below, in the formats of
# gpt/checkpoint.h and train/state.h), so no GPU is needed; each bad case is one change to a pair
# that passes every check. Needs ./prepare_data and ./train_gpt (SKIPPED without train_gpt);
# prints PASS / FAIL lines like tests/lib/test.h.
set -u
cd "$(dirname "$0")/../.."
# Every case ends where the GPU would be taken: with the devices hidden, a machine that has one
# stops there too.
export CUDA_VISIBLE_DEVICES=
if [ ! -x ./train_gpt ]; then
    echo "SKIPPED train_gpt_inputs (./train_gpt is not built: no nvcc)"
    exit 0
fi
PYTHON=${PYTHON:-python3}
tmp=${FLASHGPT_TMP:-/tmp}/train_gpt_inputs
rm -rf "$tmp"
mkdir -p "$tmp"
. tests/lib/cases.sh
has_line() { grep -qxF -- "$2" "$1"; }
# The run's one error line is exactly the expected one, or starts with it.
says() { [ "$(grep -c '^error: ' "$1")" = 1 ] && grep -q -- "^error: $2" "$1"; }
last() { grep '^error' "$1" | tail -1; }

make_text "$tmp/a.txt" 400 1
make_text "$tmp/b.txt" 400 2
./prepare_data --out-dir "$tmp/ds" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>&1

# Checkpoint files as gpt/checkpoint.h and train/state.h lay them out: a model (version 5, bf16 zeros) and a
# training state (fp32 zeros) of the shape given, each with one thing changed when asked
# (slot=AT:VALUE,AT:VALUE...: header slots set, a float by its bits: bits X; lambdas: the residual
# lambdas' tensors in the body; values: the value embeddings' tables and gates after them; smear:
# the smear's gate and lambda; backout: the backout's lambda, last).
cat > "$tmp/ckpt.py" <<'EOF'
import struct, sys
def params(maxT, V, Vp, L, NH, C, modern, lambdas, values, smear, backout):
    lambdas = 2 * L if lambdas else 0  # the residual lambdas: one of each a layer, last
    # the value embeddings on every other layer, the last among them: a (Vp, C) table and an (NH, 12) gate each
    lambdas += (L + 1) // 2 * (Vp * C + NH * 12) if values else 0
    lambdas += 25 if smear else 0  # the smear's gate (24) and lambda
    lambdas += 1 if backout else 0
    if modern:  # wte, the blocks' four matrices, lm_head
        return 2 * Vp * C + L * 12 * C * C + lambdas
    return Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C + lambdas
def pad(V):
    return (V + 127) // 128 * 128
def bits(x):
    return struct.unpack("<i", struct.pack("<f", x))[0]
kind, path = sys.argv[1], sys.argv[2]
opt = dict(a.split("=", 1) for a in sys.argv[3:])
maxT, V, L, NH, C = (int(opt.get(k, d)) for k, d in (("maxT", 64), ("V", 300), ("L", 2), ("NH", 2), ("C", 128)))
Vp = int(opt.get("Vp", pad(V)))
modern = "modern" in opt
# A header with its own Vp is refused before its size counts: a few bytes of body stand in.
parts = ("lambdas" in opt, "values" in opt, "smear" in opt, "backout" in opt)
P = params(maxT, V, Vp, L, NH, C, modern, *parts) if "Vp" not in opt else 16
if kind == "model":
    header = [20240326, 5, maxT, V, L, NH, C, Vp]
    if modern:  # version 7: the modern preset's architecture in slots 8-16 (documents, windows in
        header[1] = 7   # slots 17-83)
        header += [1, bits(10000.0), 1, 1, 1, 0, 1, 1, bits(30.0)]
    body = bytearray(2 * P)
    if "nan" in opt:
        body[2 * int(opt["nan"]):2 * int(opt["nan"]) + 2] = struct.pack("<H", 0x7fc0)
else:
    B, T = int(opt.get("B", 1)), int(opt.get("T", 64))
    ints = [20241130, 1, int(opt.get("step", 5)), maxT, V, L, NH, C, Vp, B, T, int(opt.get("grad_accum", 1)),
            2, int(opt.get("steps", 10)), int(opt.get("adam_t", opt.get("step", 5)))]
    floats = [float(opt.get("lr", 0.5)), 0.5, 0.5, 0.5]
    rest = [7, 0, 0, 0, 5, 0, 99, 0, 0, 0, 0, 64, int(opt.get("world_size", 0))]
    header = ints + [struct.unpack("<i", struct.pack("<f", x))[0] for x in floats] + rest
    if "muon" in opt:  # version 2: the optimizer and Muon's momentum, lrs and betas in slots 32-38
        header[1] = 2
        muon = [0.9, 0.001, 0.002, 0.8, 0.95]
        header += [1] + [struct.unpack("<i", struct.pack("<f", x))[0] for x in muon]
    body = bytearray(4 * 3 * P)
    # FP8's delayed scaling: that many Fp8Scale states of 80 bytes after the arrays, zero (none
    # quantised yet), the first history entry of state fp8_nan NaN when asked.
    fp8 = bytearray(80 * int(opt.get("fp8_states", 0)))
    if "fp8_nan" in opt:
        at = 80 * int(opt["fp8_nan"]) + 12
        fp8[at:at + 4] = struct.pack("<f", float("nan"))
    body += fp8
    if "nan" in opt:
        body[4 * int(opt["nan"]):4 * int(opt["nan"]) + 4] = struct.pack("<f", float("nan"))
    if "negative_v" in opt:
        at = 4 * (2 * P + int(opt["negative_v"]))
        body[at:at + 4] = struct.pack("<f", -1.0)
for pair in filter(None, opt.get("slot", "").split(",")):
    at, value = pair.split(":")
    header += [0] * (int(at) + 1 - len(header))
    header[int(at)] = bits(float(value[5:])) if value.startswith("bits ") else int(value)
data = struct.pack("<256i", *(header + [0] * (256 - len(header)))) + bytes(body)
if "cut" in opt:
    data = data[:len(data) - int(opt["cut"])]
open(path, "wb").write(data)
EOF
ckpt() { "$PYTHON" "$tmp/ckpt.py" "$@"; }

# The run every resume case starts from: the state's settings on the command line.
# The train glob goes to train_gpt unexpanded, as quoted on a command line.
train="$tmp/ds/train_*.bin"
run_args="-B 1 -T 64 --steps 10 --lr 0.5 --min-lr-frac 0.5 --warmup-steps 2 --weight-decay 0.5 --grad-clip 0.5
    --seed 7"
pair() {  # pair <dir> [model options] -- [state options]: a checkpoint pair of step 5 in dir
    local dir=$1; shift
    local model=() state=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do model+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    state=("$@")
    rm -rf "$dir"
    mkdir -p "$dir"
    ckpt model "$dir/model_00000005.bin" "${model[@]}"
    ckpt state "$dir/state_00000005.bin" "${state[@]}"
}
resume() {  # resume <dir> [extra options]: train_gpt --resume dir, its output in $tmp/out
    local dir=$1; shift
    ./train_gpt --train-data "$train" $run_args --resume "$dir" "$@" > "$tmp/out" 2>&1
}

begin "train_gpt_resume_checks_both_files_before_the_gpu"
pair "$tmp/good" --
resume "$tmp/good"
check "the pair made here is refused: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
pair "$tmp/r" cut=1 --
resume "$tmp/r"
check "a truncated model: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/model_00000005.bin: .* bytes, expected .*truncated"
pair "$tmp/r" --
: > "$tmp/r/model_00000005.bin"
resume "$tmp/r"
check "an empty model: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/model_00000005.bin: too short"
head -c "$(wc -c < "$tmp/good/model_00000005.bin")" /dev/urandom > "$tmp/r/model_00000005.bin"
resume "$tmp/r"
check "a random model: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/model_00000005.bin: not a model checkpoint"
pair "$tmp/r" maxT=128 --
resume "$tmp/r"
check "a model of another shape: $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/r: .*model_00000005.bin is .*context 128.*not one checkpoint"
pair "$tmp/r" nan=1000 --
resume "$tmp/r"
check "a model with a NaN: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/model_00000005.bin: parameter 1000 is not finite"
pair "$tmp/r" -- cut=4
resume "$tmp/r"
check "a truncated state: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: .* bytes, expected .*truncated"
pair "$tmp/r" --
: > "$tmp/r/state_00000005.bin"
resume "$tmp/r"
check "an empty state: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: too short"
head -c "$(wc -c < "$tmp/good/state_00000005.bin")" /dev/urandom > "$tmp/r/state_00000005.bin"
resume "$tmp/r"
check "a random state: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: not a training state"
pair "$tmp/r" -- L=3
resume "$tmp/r"
check "a state of another shape: $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/r: .*not one checkpoint"
pair "$tmp/r" -- nan=77
resume "$tmp/r"
check "a state with a NaN: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: the master weight of parameter 77 is nan"
pair "$tmp/r" -- negative_v=3
resume "$tmp/r"
check "a negative second moment: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: the AdamW v of parameter 3 is -1"
# Files of a later step under names train_gpt does not write are not its checkpoints: the resume
# takes step 5's pair (and reaches the GPU), not a step 9 it would find no state of.
pair "$tmp/r" --
cp "$tmp/good/model_00000005.bin" "$tmp/r/model_00000009.bin"
for name in state_9.bin state_+0000009.bin "state_ 0000009.bin" state_000000009.bin state_00000009.bin.tmp; do
    cp "$tmp/good/state_00000005.bin" "$tmp/r/$name"
    resume "$tmp/r"
    check "a state named $name beside model_00000009.bin: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
    rm "$tmp/r/$name"
done
end

begin "train_gpt_architecture_of_the_checkpoint"
# A modern model (version 7): resumed and started from with its architecture, by --arch or
# without it; another architecture asked for, a corrupt architecture and an unused slot set are
# refused naming the file or what differs.
pair "$tmp/modern" modern=1 -- modern=1
resume "$tmp/modern"
check "a modern run resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/modern" --arch modern --softcap 30
check "a modern run resumed with --arch modern: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/modern" --arch gpt2
check "a modern run resumed as gpt2: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (gpt2) is not that of $tmp/modern (modern)"
resume "$tmp/modern" --qk-norm 0
check "a modern run resumed without QK-norm: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (rotary (base 10000), rms norm, no qk-norm, .*) is not that of $tmp/modern (modern)"
resume "$tmp/good" --arch modern
check "a GPT-2 run resumed as modern: $(last "$tmp/out")" says "$tmp/out" "the architecture asked for (modern) is not that of"
pair "$tmp/r" modern=1 -- 
resume "$tmp/r"
check "a modern model with a GPT-2's state: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: .* bytes, expected"
pair "$tmp/r" modern=1 slot=12:2 -- modern=1
resume "$tmp/r"
check "a switch of 2: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/model_00000005.bin: corrupt header: a switch of the architecture is neither 0 nor 1"
pair "$tmp/r" modern=1 slot=9:0 -- modern=1
resume "$tmp/r"
check "a rotary base of 0: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/model_00000005.bin: corrupt header: the rotary base"
pair "$tmp/r" modern=1 slot=84:1 -- modern=1
resume "$tmp/r"
check "a slot past the architecture: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/model_00000005.bin: corrupt header: slot 84 holds 1"
pair "$tmp/r" modern=1 C=96 -- modern=1 C=96
resume "$tmp/r"
check "rotary at head size 48: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/model_00000005.bin: head size 48: flash attention: head size must be 64 or 128"
ckpt model "$tmp/modern.bin" modern=1
./train_gpt --train-data "$train" -T 64 --init-from "$tmp/modern.bin" > "$tmp/out" 2>&1
check "--init-from a modern model: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
./train_gpt --train-data "$train" -T 64 --init-from "$tmp/modern.bin" --head tied > "$tmp/out" 2>&1
check "--init-from a modern model, --head tied: $(last "$tmp/out")" says "$tmp/out" "the architecture asked for"
./train_gpt --train-data "$train" --model d2 --context 64 -T 64 --arch modern --optimizer muon --head-lr 0.01 \
    --recompute layernorm > "$tmp/out" 2>&1
check "--arch modern: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
./train_gpt --train-data "$train" --model d2 --context 64 -T 64 --optimizer muon --head-lr 0.01 > "$tmp/out" 2>&1
check "--head-lr of a tied head: $(last "$tmp/out")" says "$tmp/out" "--head-lr: the model's head is wte"
./train_gpt --train-data "$train" --model d2 --context 64 -T 64 --arch modern --recompute gelu > "$tmp/out" 2>&1
check "--recompute gelu of relu2: $(last "$tmp/out")" says "$tmp/out" "--recompute gelu: the relu2 MLP"
# The rotary base's bound is the header's (gpt/config.h), stated at the option check: before
# the training data is looked for.
./train_gpt --train-data "$tmp/none_*.bin" --model d2 --context 64 -T 64 --arch modern --rotary-base 1 > "$tmp/out" 2>&1
check "--rotary-base 1: $(last "$tmp/out")" says "$tmp/out" \
    "--rotary-base 1: the rotary base must be a finite number above 1"
pair "$tmp/r" modern=1 slot=9:1065353216 -- modern=1
resume "$tmp/r"
check "a rotary base of 1 in the header: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/model_00000005.bin: corrupt header: the rotary base must be a finite number above 1"
./train_gpt --train-data "$train" --model d2 --context 64 -T 64 --arch other > "$tmp/out" 2>&1
check "--arch other: $(last "$tmp/out")" says "$tmp/out" "--arch other: expected gpt2, modern or 2026"
if [ -x ./generate ]; then
    ./generate --checkpoint "$tmp/modern.bin" --tokenizer "$tmp/ds/tokenizer.bin" hello > "$tmp/out" 2>&1
    check "generate a modern model: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
fi
end

begin "train_gpt_parts_of_the_checkpoint"
# The parts of the 2026 recipe (version 9: slots 84 on; version 7 holds none): a modern model
# with parts resumed with them (the residual lambdas', the value embeddings', the smear's and the
# backout's tensors in the model and in the state), and a version 7 one without; refused naming the file
# and what is wrong: a part out of its range, the lambdas or the value embeddings without their
# tensors, the smear under the ring, a slot past the parts, a version 7 file with a part's slot,
# the next version; the options refused before the GPU is taken.
parts_slots="slot=1:9,84:1,85:bits 1.25,86:1,87:1,88:1,89:1"
all_parts="lambdas=1 values=1 smear=1 backout=1"
pair "$tmp/parts" modern=1 "$parts_slots" $all_parts -- modern=1 $all_parts
# Every part on: the preset nearest is 2026 (wsd), but a resumed run's schedule is its own
# (cosine) where not given, and one given must be its own.
resume "$tmp/parts"
check "a version 9 model with parts resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/parts" --lr-schedule wsd
check "a version 9 model with every part resumed asking for another schedule: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/parts: the run used --lr-schedule cosine, this one asks for --lr-schedule wsd"
resume "$tmp/parts" --lr-schedule cosine
check "a version 9 model with parts resumed asking for its schedule: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/parts" --arch modern --embedding-norm 1 --qk-scale 1.25 --residual-lambdas 1 --value-embeddings 1 \
    --smear 1 --backout 1
check "resumed asking for its parts: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/parts" --context-parallel 2
check "a model with the smear under the ring: $(last "$tmp/out")" says "$tmp/out" \
    "--context-parallel 2: the smear looks one token back, which lies in another chunk of the sequence"
resume "$tmp/parts" --embedding-norm 0
check "resumed without its embedding norm: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (modern, qk scale 1.25, residual lambdas, value embeddings, smear, backout) is not that of $tmp/parts (modern, embedding norm, qk scale 1.25, residual lambdas, value embeddings, smear, backout)"
resume "$tmp/parts" --qk-scale 1.2
check "resumed with another QK scale: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (modern, embedding norm, qk scale 1.2, residual lambdas, value embeddings, smear, backout) is not that of $tmp/parts"
resume "$tmp/parts" --value-embeddings 0
check "resumed without its value embeddings: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (modern, embedding norm, qk scale 1.25, residual lambdas, smear, backout) is not that of $tmp/parts"
resume "$tmp/parts" --smear 0
check "resumed without its smear: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (modern, embedding norm, qk scale 1.25, residual lambdas, value embeddings, backout) is not that of $tmp/parts"
resume "$tmp/parts" --backout 0
check "resumed without its backout: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (modern, embedding norm, qk scale 1.25, residual lambdas, value embeddings, smear) is not that of $tmp/parts"
pair "$tmp/r" modern=1 "$parts_slots" values=1 smear=1 backout=1 -- modern=1 $all_parts
resume "$tmp/r"
check "a model with residual lambdas but not their tensors: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/model_00000005.bin: .* bytes, expected .*truncated"
pair "$tmp/r" modern=1 "$parts_slots" lambdas=1 smear=1 backout=1 -- modern=1 $all_parts
resume "$tmp/r"
check "a model with value embeddings but not their tensors: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/model_00000005.bin: .* bytes, expected .*truncated"
resume "$tmp/modern" --embedding-norm 1
check "a version 7 model resumed with an embedding norm: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (modern, embedding norm) is not that of $tmp/modern (modern)"
pair "$tmp/r" modern=1 slot=1:9 -- modern=1
resume "$tmp/r"
check "a version 9 model without parts: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
if [ -x ./generate ]; then
    ./generate --checkpoint "$tmp/parts/model_00000005.bin" --tokenizer "$tmp/ds/tokenizer.bin" hello > "$tmp/out" 2>&1
    check "generate a model with parts: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
fi
while IFS='|' read -r slots why; do
    pair "$tmp/r" modern=1 slot="$slots" -- modern=1
    resume "$tmp/r"
    check "slots $slots: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/model_00000005.bin: $why"
done <<'EOF'
84:5|corrupt header: slot 84 holds 5, past the architecture every slot is 0
1:9,84:2|corrupt header: a switch of the architecture is neither 0 nor 1
1:9,85:bits 9|corrupt header: the QK scale must be 0 (none) or a number from 0.125 to 8
1:9,11:0,85:bits 1.25|corrupt header: a QK scale without QK-norm
1:9,86:2|corrupt header: a switch of the architecture is neither 0 nor 1
1:9,87:2|corrupt header: a switch of the architecture is neither 0 nor 1
1:9,88:-1|corrupt header: a switch of the architecture is neither 0 nor 1
1:9,89:2|corrupt header: a switch of the architecture is neither 0 nor 1
1:9,90:1|corrupt header: slot 90 holds 1, past the architecture every slot is 0
1:10|unsupported checkpoint version 10
EOF
pair "$tmp/r" modern=1 "slot=1:9,85:bits 1" -- modern=1
resume "$tmp/r" --arch modern
check "a QK scale of 1 in the header, read as none: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
while IFS='|' read -r options why; do
    ./train_gpt --train-data "$train" --model d2 --context 64 -T 64 $options > "$tmp/out" 2>&1
    check "$options: $(last "$tmp/out")" says "$tmp/out" "$why"
done <<'EOF'
--embedding-norm 2|--embedding-norm 2: expected an integer from 0 to 1
--residual-lambdas 2|--residual-lambdas 2: expected an integer from 0 to 1
--value-embeddings 2|--value-embeddings 2: expected an integer from 0 to 1
--smear 2|--smear 2: expected an integer from 0 to 1
--backout 2|--backout 2: expected an integer from 0 to 1
--arch modern --qk-scale 9|--qk-scale 9: the QK scale must be 0 (none) or a number from 0.125 to 8
--arch modern --qk-scale -1|--qk-scale -1: the QK scale must be
--qk-scale 1.2|the architecture (gpt2, qk scale 1.2): a QK scale without QK-norm
--arch modern --qk-scale 1|the model (L 2 C 128 NH 2 V 300 context 64, modern, qk scale 1): a QK scale of 1, which scales nothing
EOF
end

begin "train_gpt_key_windows_checked_before_the_gpu"
# Attention's key windows: documents (slots 17-18), a window pattern (19, and 20-83) in a modern
# model's header, resumed with them (under the ring too) or refused naming the file and what is
# wrong; the options
# --document-mask (which takes the tokenizer's <|endoftext|>), --window and --window-pattern,
# refused in one line where they cannot be; what train_gpt --help says of them.
eot=$("$PYTHON" -c 'import struct, sys; print(struct.unpack_from("<5i", open(sys.argv[1], "rb").read())[4])' \
    "$tmp/ds/tokenizer.bin" 2>/dev/null)
pair "$tmp/masked" modern=1 slot=17:1,18:7,19:2,21:16 -- modern=1
resume "$tmp/masked"
check "documents and the windows full,16 resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/masked" --context-parallel 2
check "resumed under the ring: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/masked" --window 16
check "resumed with another window: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (modern, documents (token 7), windows 16) is not that of $tmp/masked (modern, documents (token 7), windows full,16)"
resume "$tmp/masked" --tokenizer "$tmp/ds/tokenizer.bin"
check "with a tokenizer whose <|endoftext|> is not 7: $(last "$tmp/out")" says "$tmp/out" \
    "--tokenizer $tmp/ds/tokenizer.bin: its <|endoftext|> is token $eot, the documents of $tmp/masked start at token 7"
pair "$tmp/r" modern=1 slot=17:1,18:300 -- modern=1
resume "$tmp/r"
check "a document token past the vocabulary: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/model_00000005.bin: corrupt header: the document token is outside the vocabulary"
while IFS='|' read -r slots why; do
    pair "$tmp/r" modern=1 slot="$slots" -- modern=1
    resume "$tmp/r"
    check "slots $slots: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/model_00000005.bin: corrupt header: $why"
done <<'EOF'
17:2|a switch of the architecture is neither 0 nor 1
18:5|the document token is negative, or set without documents
19:65|the window count is not 0 to 64
19:1,20:-3|a window is negative
19:1,21:8|a window is set past the pattern
EOF
fresh() {  # fresh [options]: a new d2 run, its output in $tmp/out
    ./train_gpt --train-data "$train" --model d2 --context 64 -T 64 --arch modern "$@" > "$tmp/out" 2>&1
}
fresh --document-mask --window-pattern 32,full --tokenizer "$tmp/ds/tokenizer.bin"
check "--document-mask --window-pattern 32,full: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
fresh --document-mask
check "--document-mask without --tokenizer: $(last "$tmp/out")" says "$tmp/out" \
    "--document-mask: a document starts at <|endoftext|>, whose id comes from --tokenizer: give it"
fresh --window 8 --context-parallel 2
check "--window under the ring: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
fresh --window 8 --window-pattern 8,full
check "--window and --window-pattern: $(last "$tmp/out")" says "$tmp/out" "--window and --window-pattern exclude each other"
fresh --window 0
check "--window 0: $(last "$tmp/out")" says "$tmp/out" "--window 0: expected an integer from 1 to"
many=$(printf '8,%.0s' $(seq 64))full
while IFS='|' read -r pattern why; do
    fresh --window-pattern "$pattern"
    check "--window-pattern '$pattern': $(last "$tmp/out")" says "$tmp/out" "--window-pattern $why"
done <<EOF
1,,2|'1,,2': expected windows (keys, or full) separated by commas
8,|'8,': expected windows (keys, or full) separated by commas
0,8|0: expected an integer from 1 to
8,long|'8,long': 'long' is neither a number of keys nor full
$many|'$many': more than 64 windows
EOF
fresh --window-pattern full,full
check "--window-pattern full,full: none, every layer seeing the whole context: $(last "$tmp/out")" says "$tmp/out" \
    "no CUDA device"
./train_gpt --help > "$tmp/out" 2>&1
grep -q -- "--window-pattern LIST   a window per layer: comma-separated windows, each a number" "$tmp/out" &&
    grep -q -- "of keys or full (no bound), layer l taking item l mod" "$tmp/out" && grep -q -- "--document-mask" "$tmp/out"
check "train_gpt --help says the options of key windows and the pattern's syntax" test $? = 0
if [ -x ./generate ]; then
    ./generate --checkpoint "$tmp/masked/model_00000005.bin" --tokenizer "$tmp/ds/tokenizer.bin" hello > "$tmp/out" 2>&1
    check "generate with a tokenizer whose <|endoftext|> is not the model's: $(last "$tmp/out")" says "$tmp/out" \
        "--tokenizer $tmp/ds/tokenizer.bin: its <|endoftext|> is token $eot, the documents of $tmp/masked/model_00000005.bin start at token 7"
fi
if [ -x ./evaluate ]; then
    ./evaluate --checkpoint "$tmp/masked/model_00000005.bin" --tokenizer "$tmp/ds/tokenizer.bin" \
        --hellaswag tests/data/hellaswag_tiny.jsonl > "$tmp/out" 2>&1
    check "evaluate with a tokenizer whose <|endoftext|> is not the model's: $(last "$tmp/out")" says "$tmp/out" \
        "--tokenizer $tmp/ds/tokenizer.bin: its <|endoftext|> is token $eot, the documents of $tmp/masked/model_00000005.bin start at token 7"
fi
end

begin "train_gpt_state_header_sizes_bounded"
# B * T * micro-steps * ranks far past 2^63, each within an int32.
pair "$tmp/r" -- B=1073741824 T=64 grad_accum=2147483647 world_size=2147483647
resume "$tmp/r"
check "B near 2^30: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: corrupt training state header"
pair "$tmp/r" -- grad_accum=2147483647 world_size=2147483647
resume "$tmp/r"
check "micro-steps and ranks near 2^31: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: corrupt training state header"
pair "$tmp/r" -- step=11
resume "$tmp/r"
check "a step past the run's steps: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: corrupt training state header"
end

begin "train_gpt_resume_needs_the_same_settings"
# Each setting an exact resume needs, changed on the command line: one line naming its flag, with
# the value the state holds (read from its slot) and the one asked for.
pair "$tmp/good" --
while IFS='|' read -r asked was; do
    resume "$tmp/good" $asked
    check "$asked: $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/good: the run used $was, this one asks for $asked"
done <<'EOF'
-B 2|-B 1
-T 32|-T 64
--warmup-steps 3|--warmup-steps 2
--lr 0.25|--lr 0.5
--min-lr-frac 0.25|--min-lr-frac 0.5
--weight-decay 0.25|--weight-decay 0.5
--grad-clip 0.25|--grad-clip 0.5
--seed 8|--seed 7
--attention naive|--attention flash
--deterministic|no --deterministic
--recompute gelu|--recompute none
--classifier-chunk 32|--classifier-chunk 64
--total-batch-size 128|--total-batch-size 64
--optimizer muon|--optimizer adamw
EOF
# A Muon run's state: resumed with its settings, or refused naming the one that differs.
muon="--optimizer muon --muon-momentum 0.9 --embedding-lr 0.001 --vector-lr 0.002"
pair "$tmp/muon" -- muon=1
resume "$tmp/muon" $muon
check "a Muon run resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
while IFS='|' read -r asked was; do
    resume "$tmp/muon" $muon $asked
    check "muon $asked: $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/muon: the run used $was, this one asks for $asked"
done <<'EOF'
--muon-momentum 0.8|--muon-momentum 0.9
--embedding-lr 0.003|--embedding-lr 0.001
--vector-lr 0.003|--vector-lr 0.002
--adam-beta1 0.9|--adam-beta1 0.8
--adam-beta2 0.99|--adam-beta2 0.95
EOF
resume "$tmp/muon" --optimizer adamw
check "a Muon run resumed with AdamW: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/muon: the run used --optimizer muon, this one asks for --optimizer adamw"
# Other steps change only the learning-rate schedule: said, and the run goes on.
resume "$tmp/good" --steps 12
check "--steps 12: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
check "--steps 12 said" has_line "$tmp/out" "note: --steps 12, the run had --steps 10: the learning-rate schedule changes"
end

begin "train_gpt_align_documents_checked_before_the_gpu"
# --align-documents takes the tokenizer's <|endoftext|> and shards that hold it: said at start
# with what an epoch leaves unseen, or refused in one line; the training state records it
# (version 4: slots 46-47), and a resume must ask for the same alignment at the same token.
eot=$("$PYTHON" -c 'import struct, sys; print(struct.unpack_from("<5i", open(sys.argv[1], "rb").read())[4])' \
    "$tmp/ds/tokenizer.bin" 2>/dev/null)
tok="$tmp/ds/tokenizer.bin"
./train_gpt --train-data "$train" --model d2 --context 64 -T 64 --align-documents --tokenizer "$tok" > "$tmp/out" 2>&1
check "--align-documents: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
said="^rows aligned to documents \(<\|endoftext\|> = $eot\): [0-9]+ rows, each from the start of one of the [0-9]+ "
said+="documents on into those after it; the rest of the document a row ends in starts no row: [0-9.]+% of the tokens "
said+="unseen per epoch$"
check "--align-documents says its rows and what they leave unseen" grep -qE "$said" "$tmp/out"
rows=$(sed -n 's/^rows aligned to documents .*: \([0-9]*\) rows, .*/\1/p' "$tmp/out")
./train_gpt --train-data "$train" --model d2 --context 64 -T 64 > "$tmp/out" 2>&1
check "without --align-documents no such line" not has "$tmp/out" "aligned to documents"
./train_gpt --train-data "$train" --model d2 --context 64 -T 64 --align-documents > "$tmp/out" 2>&1
check "--align-documents without --tokenizer: $(last "$tmp/out")" says "$tmp/out" \
    "--align-documents: a row starts at <|endoftext|>, whose id comes from --tokenizer: give it"
# A shard of the tokenizer's vocabulary without its <|endoftext|>.
"$PYTHON" -c 'import struct, sys
eot = int(sys.argv[2])
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, 3000, 300, *[0] * 252) +
                              struct.pack("<3000H", *[i % eot for i in range(3000)]))' "$tmp/no_documents_000.bin" "$eot"
./train_gpt --train-data "$tmp/no_documents_*.bin" --val-data '' --model d2 --context 64 -T 64 --align-documents \
    --tokenizer "$tok" > "$tmp/out" 2>&1
check "shards without <|endoftext|>: $(last "$tmp/out")" says "$tmp/out" \
    "--align-documents: $tmp/no_documents_\*.bin: none of its 3000 tokens is $eot, the token that starts a document"
# A batch of one row more than the documents give, fewer than the stream's samples without them.
./train_gpt --train-data "$train" --val-data '' --model d2 --context 64 -T 64 -B $((rows + 1)) --align-documents \
    --tokenizer "$tok" > "$tmp/out" 2>&1
check "too few rows for a batch: $(last "$tmp/out")" says "$tmp/out" \
    "--align-documents: $tmp/ds/train_\*.bin: .* make $rows samples of T+1 = 65 tokens starting at a document, fewer than one batch of $((rows + 1))"
./train_gpt --help > "$tmp/out" 2>&1
check "train_gpt --help says --align-documents" has "$tmp/out" "--align-documents  *each training row starts at a document's"
pair "$tmp/aligned" -- slot=1:4,46:1,47:$eot
resume "$tmp/aligned" --align-documents --tokenizer "$tok"
check "an aligned run resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/aligned"
check "an aligned run resumed without it: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/aligned: the run used --align-documents, this one asks for no --align-documents"
pair "$tmp/good" --
resume "$tmp/good" --align-documents --tokenizer "$tok"
check "a run resumed aligned: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/good: the run used no --align-documents, this one asks for --align-documents"
pair "$tmp/r" -- slot=1:4,46:1,47:7
resume "$tmp/r" --align-documents --tokenizer "$tok"
check "aligned at another token: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/r: the run used --align-documents at token 7, this one asks for --align-documents at token $eot"
while IFS='|' read -r slots why; do
    pair "$tmp/r" -- slot="$slots"
    resume "$tmp/r"
    check "state slots $slots: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: corrupt training state header: $why"
done <<'EOF'
1:4|the version is not the rows' alignment's
46:1,47:3|the version is not the rows' alignment's
1:4,46:1,47:300|the document token is set without --align-documents, or outside the vocabulary
47:3|the document token is set without --align-documents, or outside the vocabulary
EOF
pair "$tmp/r" -- slot=1:8,46:1,47:3
resume "$tmp/r"
check "state version 8: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: unsupported training state version 8"
end

begin "train_gpt_model_header_sizes_bounded"
# A vocabulary near 2^31 whose padding wraps to a negative Vp in 32 bits, stated in the header.
ckpt model "$tmp/wrapped.bin" V=2147483637 Vp=-2147483520
./train_gpt --train-data "$train" -T 64 --init-from "$tmp/wrapped.bin" > "$tmp/out" 2>&1
check "V near 2^31, Vp negative: $(last "$tmp/out")" says "$tmp/out" "$tmp/wrapped.bin: corrupt header"
# A shard that states a vocabulary near 2^31: the model's vocabulary when no file gives one.
"$PYTHON" -c 'import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, 1000, 2147483647, *[0] * 252) + bytes(2000))' \
    "$tmp/huge_vocab_000.bin"
./train_gpt --train-data "$tmp/huge_vocab_*.bin" --model d2 --context 64 -T 64 > "$tmp/out" 2>&1
check "a shard's vocabulary near 2^31: $(last "$tmp/out")" says "$tmp/out" "the model (.*V 2147483647.*) cannot be built: the vocabulary"
end

begin "train_gpt_nonfinite_weights_before_the_gpu"
ckpt model "$tmp/nan.bin" nan=12345
ckpt model "$tmp/fine.bin"
./train_gpt --train-data "$train" -T 64 --init-from "$tmp/fine.bin" > "$tmp/out" 2>&1
check "--init-from a good checkpoint: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
./train_gpt --train-data "$train" -T 64 --init-from "$tmp/nan.bin" > "$tmp/out" 2>&1
check "--init-from a NaN: $(last "$tmp/out")" says "$tmp/out" "$tmp/nan.bin: parameter 12345 is not finite"
if [ -x ./generate ]; then
    ./generate --checkpoint "$tmp/fine.bin" --tokenizer "$tmp/ds/tokenizer.bin" hello > "$tmp/out" 2>&1
    check "generate a good checkpoint: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
    ./generate --checkpoint "$tmp/nan.bin" --tokenizer "$tmp/ds/tokenizer.bin" hello > "$tmp/out" 2>&1
    check "generate a NaN: $(last "$tmp/out")" says "$tmp/out" "$tmp/nan.bin: parameter 12345 is not finite"
fi
end

begin "train_gpt_outputs_checked_before_the_gpu"
data="--model d2 --context 64 -T 64"
mkdir -p "$tmp/outs"
: > "$tmp/outs/a_file"
./train_gpt --train-data "$train" $data --log "$tmp/outs" > "$tmp/out" 2>&1
check "--log a folder: $(last "$tmp/out")" says "$tmp/out" "--log $tmp/outs: is a directory"
./train_gpt --train-data "$train" $data --log "$tmp/outs/a_file/log.csv" > "$tmp/out" 2>&1
check "--log under a file: $(last "$tmp/out")" says "$tmp/out" "--log $tmp/outs/a_file/log.csv: $tmp/outs/a_file is not a directory"
./train_gpt --train-data "$train" $data --log "$tmp/outs/new/sub/log.csv" > "$tmp/out" 2>&1
check "--log in a folder to make: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
check "--log's folder made before the GPU" test ! -e "$tmp/outs/new"
./train_gpt --train-data "$train" $data --out-dir "$tmp/outs/a_file" > "$tmp/out" 2>&1
check "--out-dir a file: $(last "$tmp/out")" says "$tmp/out" "--out-dir $tmp/outs/a_file: $tmp/outs/a_file is not a directory"
./train_gpt --train-data "$train" $data --out-dir "$tmp/outs/a_file/sub" > "$tmp/out" 2>&1
check "--out-dir under a file: $(last "$tmp/out")" says "$tmp/out" "--out-dir $tmp/outs/a_file/sub: $tmp/outs/a_file is not a directory"
./train_gpt --train-data "$train" $data --out-dir '' > "$tmp/out" 2>&1
check "--out-dir '': $(last "$tmp/out")" says "$tmp/out" "--out-dir '': the folder name is empty"
# Every option naming a file or folder refuses an empty name in its own words, before any work.
for flag in --tokenizer --init-from --save-init --log --resume; do
    what=file; [ "$flag" = --resume ] && what=folder
    ./train_gpt --train-data "$train" $data $flag '' > "$tmp/out" 2>&1
    check "$flag '': $(last "$tmp/out")" says "$tmp/out" "$flag '': the $what name is empty"
done
for program in generate evaluate; do
    ./$program --checkpoint '' > "$tmp/out" 2>&1
    check "$program --checkpoint '': $(last "$tmp/out")" says "$tmp/out" "--checkpoint '': the file name is empty"
done
./train_gpt --train-data "$train" $data --out-dir "$tmp/outs/new/run" > "$tmp/out" 2>&1
check "--out-dir to make: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
check "--out-dir made before the GPU" test ! -e "$tmp/outs/new"
# A folder that cannot be written (permissions do not hold for root, so only where they do).
mkdir -p "$tmp/outs/locked"
chmod 555 "$tmp/outs/locked"
if ! touch "$tmp/outs/locked/probe" 2>/dev/null; then
    ./train_gpt --train-data "$train" $data --out-dir "$tmp/outs/locked/run" > "$tmp/out" 2>&1
    check "--out-dir unwritable: $(last "$tmp/out")" says "$tmp/out" "--out-dir $tmp/outs/locked/run: cannot write in $tmp/outs/locked"
    ./train_gpt --train-data "$train" $data --log "$tmp/outs/locked/log.csv" > "$tmp/out" 2>&1
    check "--log unwritable: $(last "$tmp/out")" says "$tmp/out" "--log $tmp/outs/locked/log.csv: cannot write in $tmp/outs/locked"
fi
chmod 755 "$tmp/outs/locked"
# The resume folder is the checkpoint folder when --out-dir is not given.
pair "$tmp/r" --
chmod 555 "$tmp/r"
if ! touch "$tmp/r/probe" 2>/dev/null; then
    resume "$tmp/r"
    check "--resume unwritable: $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/r: cannot write in $tmp/r"
fi
chmod 755 "$tmp/r"
end

begin "train_gpt_log_is_never_an_input"
# The log is opened once the GPU is taken, which would empty the file: an input as --log (also
# through a link) is refused before that, and left as it was.
data="--model d2 --context 64 -T 64"
ckpt model "$tmp/init.bin"
ln -sf ds/tokenizer.bin "$tmp/tokenizer_link.bin"
sums_before=$(cksum "$tmp/ds/"*.bin "$tmp/init.bin")
while IFS='|' read -r log flag input; do
    ./train_gpt --train-data "$train" $data --tokenizer "$tmp/ds/tokenizer.bin" --init-from "$tmp/init.bin" \
        --log "$log" > "$tmp/out" 2>&1
    check "--log $log: $(last "$tmp/out")" says "$tmp/out" "--log $log: is the input $flag $input (not overwritten)"
done <<EOF
$tmp/ds/train_000000.bin|--train-data|$tmp/ds/train_000000.bin
$tmp/ds/val_000000.bin|--val-data|$tmp/ds/val_000000.bin
$tmp/ds/tokenizer.bin|--tokenizer|$tmp/ds/tokenizer.bin
$tmp/tokenizer_link.bin|--tokenizer|$tmp/ds/tokenizer.bin
$tmp/init.bin|--init-from|$tmp/init.bin
EOF
pair "$tmp/good" --
resume "$tmp/good" --log "$tmp/good/state_00000005.bin"
check "--log the resumed state: $(last "$tmp/out")" says "$tmp/out" \
    "--log $tmp/good/state_00000005.bin: is the input --resume $tmp/good/state_00000005.bin (not overwritten)"
check "an input changed" test "$(cksum "$tmp/ds/"*.bin "$tmp/init.bin")" = "$sums_before"
end

begin "train_gpt_save_init_writes_the_initial_model_without_the_gpu"
# --save-init: the model a run of the seed starts from, as a version 3 (fp32) checkpoint of the
# run's shape, then the run stops (0) before the GPU: gpt/param_table.h's init, each value a bf16
# one (the master weights train_gpt starts from); the same file for the same seed, another for
# another; a file --init-from takes. Refused in one line, writing nothing: with --init-from or
# --resume, or as a folder, a missing folder or an input.
data="--model d2 --context 64 -T 64"
mkdir -p "$tmp/init"
./train_gpt --train-data "$train" $data --seed 7 --save-init "$tmp/init/s7.bin" > "$tmp/out" 2>&1
check "--save-init: exit $?, $(tail -1 "$tmp/out")" has_line "$tmp/out" "initial model (seed 7): $tmp/init/s7.bin"
check "--save-init said an error" not has "$tmp/out" "^error"
"$PYTHON" - "$tmp/init/s7.bin" > "$tmp/init/check" 2>&1 <<'EOF'
import sys
sys.path.insert(0, "scripts")
from gpt2_checkpoint import Checkpoint, Shape
c = Checkpoint(sys.argv[1])
assert c.version == 3 and c.shape == Shape(maxT=64, V=300, L=2, NH=2, C=128), (c.version, c.shape)
assert not (c.values.view("<u4") & 0xFFFF).any(), "a value that is no bf16 value"
for sl, v in c.slices():
    name = sl.hf_name
    if name == "wte.weight":
        assert not v[300:].any(), "a padding row of wte is not zero"
        v = v[:300]
    if name.endswith("bias"):
        assert not v.any(), name
    elif name.startswith(("ln_", "h.0.ln_", "h.1.ln_")):
        assert (v == 1).all(), name
    else:  # N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 L))
        std = 0.01 if name.endswith("c_proj.weight") else 0.02
        assert abs(v.std() / std - 1) < 0.1 and abs(v.mean()) < 0.1 * std, (name, v.mean(), v.std())
print("ok")
EOF
check "the file: $(tail -1 "$tmp/init/check")" test "$(cat "$tmp/init/check")" = ok
./train_gpt --train-data "$train" $data --seed 7 --save-init "$tmp/init/again7.bin" > "$tmp/out" 2>&1
check "the same seed, another file" cmp -s "$tmp/init/s7.bin" "$tmp/init/again7.bin"
./train_gpt --train-data "$train" $data --seed 8 --save-init "$tmp/init/s8.bin" > "$tmp/out" 2>&1
check "seed 8: $(tail -1 "$tmp/out")" test -s "$tmp/init/s8.bin"
check "seeds 7 and 8, one file" not cmp -s "$tmp/init/s7.bin" "$tmp/init/s8.bin"
./train_gpt --train-data "$train" $data --init-from "$tmp/init/s7.bin" > "$tmp/out" 2>&1
check "--init-from the file: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
pair "$tmp/good" --
sums_before=$(cksum "$tmp/ds/"*.bin "$tmp/init/s7.bin")
while IFS='|' read -r args message; do
    ./train_gpt --train-data "$train" $data --tokenizer "$tmp/ds/tokenizer.bin" $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$message"
done <<EOF
--save-init $tmp/init/new.bin --init-from $tmp/init/s7.bin|--save-init writes the model drawn from --seed, not one of --resume or --init-from
--save-init $tmp/init/new.bin --resume $tmp/good|--save-init writes the model drawn from --seed, not one of --resume or --init-from
--save-init $tmp/init|--save-init $tmp/init: is a directory
--save-init $tmp/init/missing/new.bin|--save-init $tmp/init/missing/new.bin: cannot write .*/init/missing: No such
--save-init $tmp/ds/train_000000.bin|--save-init $tmp/ds/train_000000.bin: is the input --train-data $tmp/ds/train_000000.bin
--save-init $tmp/ds/tokenizer.bin|--save-init $tmp/ds/tokenizer.bin: is the input --tokenizer $tmp/ds/tokenizer.bin
EOF
check "a refused --save-init wrote a file: $(ls "$tmp/init" | tr '\n' ' ')" \
    test "$(ls "$tmp/init" | tr '\n' ' ')" = "again7.bin check s7.bin s8.bin "
check "an input changed" test "$(cksum "$tmp/ds/"*.bin "$tmp/init/s7.bin")" = "$sums_before"
end

begin "train_gpt_resume_writes_only_its_own_folder"
# A resumed run writes into the folder it resumes, however it is spelled, but not into one that
# holds another run's checkpoints.
pair "$tmp/good" --
resume "$tmp/good" --out-dir "$tmp/good/."
check "--out-dir the resumed folder: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
pair "$tmp/other" --
resume "$tmp/good" --out-dir "$tmp/other"
check "--out-dir of another run: $(last "$tmp/out")" says "$tmp/out" \
    "--out-dir $tmp/other holds the checkpoints of another run (2 files, the latest of step 5): --resume $tmp/other continues it"
end

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
# The batches depend on the text, whose words come from awk's generator, which awks differ in.
check "the start-up lines name the train shards" grep -qF -- \
    "train data: $tmp/vd/train_x/train_*.bin: 1 shard ($tmp/vd/train_x/train_000000.bin), " "$tmp/out"
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
# The optimizer: its name, Muon's own settings only with it, and theirs in range.
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $data $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<'EOF'
--optimizer sgd|--optimizer sgd: expected adamw or muon
--muon-momentum 0.9|--muon-momentum is a setting of --optimizer muon
--adam-beta1 0.9|--adam-beta1 is a setting of --optimizer muon
--optimizer muon --muon-momentum 1|--muon-momentum 1 must be in \[0, 1)
--optimizer muon --embedding-lr 0|--embedding-lr 0 must be > 0
--optimizer muon --embedding-lr -1|--embedding-lr -1 must be > 0
--optimizer muon --adam-beta2 -0.5|--adam-beta2 -0.5 must be in \[0, 1)
--optimizer muon --lr 0|--lr 0 must be > 0
--lr 0|--lr 0 must be > 0
--lr -1|--lr -1 must be > 0
--optimizer muon --lr 0.01 --muon-momentum 0 --weight-decay 0.1|no CUDA device
--weight-decay 1e30|--weight-decay 1e+30: times --lr 0.0003 it is 3e+26, and must stay below 1
--weight-decay 3000|no CUDA device
--weight-decay 2 --lr 0.5|--weight-decay 2: times --lr 0.5 it is 1, and must stay below 1
--optimizer muon --arch modern --weight-decay 20|--weight-decay 20: times --embedding-lr 0.05 it is 1
--optimizer muon --arch modern --weight-decay 19|no CUDA device
--seed -1|--seed -1: expected an integer from 0 to 18446744073709551615
--seed 18446744073709551616|--seed 18446744073709551616: expected an integer from 0 to
--seed 18446744073709551615|no CUDA device
--softcap 1e-40|--softcap 1e-40: the softcap must be 0 (none) or a finite number of at least 1
--softcap 0.5|--softcap 0.5: the softcap must be
--softcap -1|--softcap -1: the softcap must be
--softcap 1|no CUDA device
EOF
end

begin "train_gpt_and_generate_name_the_wrong_argument"
# An error names the argument that is wrong, not the one before it; after -- an argument is an
# operand (generate's prompt) however it starts; a float below the normal range is taken.
data="--model d2 --context 64 -T 64"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $data $args > "$tmp/out" 2>&1
    check "train_gpt $args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<'EOF'
-xyz|unknown option -x in '-xyz' (train_gpt --help lists the options)
-x|unknown option -x (train_gpt --help lists the options)
--nothing|unknown option --nothing (train_gpt --help lists the options)
--s 5|--s is ambiguous: it begins 8 options
--deterministic=1|--deterministic takes no value
--steps|--steps needs a value
-- extra|unexpected argument 'extra'
--temperature 1e-45|no CUDA device
--temperature 1e-50|--temperature 1e-50: too small for a float
--lr 1e39|--lr 1e39: too large for a float
EOF
if [ -x ./generate ]; then
    model=(--checkpoint "$tmp/fine.bin" --tokenizer "$tmp/ds/tokenizer.bin")
    ./generate "${model[@]}" "-5 degrees" > "$tmp/out" 2>&1
    check "generate '-5 degrees': $(last "$tmp/out")" says "$tmp/out" \
        "unknown option -5 in '-5 degrees' (generate --help lists the options; a PROMPT that starts with '-' goes after --)"
    ./generate "${model[@]}" -- "-5 degrees" > "$tmp/out" 2>&1
    check "generate -- '-5 degrees': $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
    ./generate "${model[@]}" --temperature 1e-45 > "$tmp/out" 2>&1
    check "generate --temperature 1e-45: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
fi
end

begin "train_gpt_sample_tokens_up_to_the_largest_int"
# A sample longer than the window slides through it: any count that fits an int is fine.
for n in 1 63 64 2147483646 2147483647; do
    ./train_gpt --train-data "$train" $data --tokenizer "$tmp/ds/tokenizer.bin" --sample-every 1 --sample-tokens $n \
        > "$tmp/out" 2>&1
    check "--sample-tokens $n: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
done
./train_gpt --train-data "$train" --model d2 --context 64 -T 1 --tokenizer "$tmp/ds/tokenizer.bin" --sample-every 1 \
    > "$tmp/out" 2>&1
check "-T 1: $(last "$tmp/out")" says "$tmp/out" "--sample-every: -T 1 leaves no room for a sample"
end

begin "train_gpt_head_sizes_of_the_header"
# The header states the head sizes every program runs a model at (flash's, which generation
# runs): 8 and 16 are refused there, before any program takes the file.
ckpt model "$tmp/hs8.bin" C=16
./train_gpt --train-data "$train" -T 64 --init-from "$tmp/hs8.bin" --attention naive > "$tmp/out" 2>&1
check "a GPT-2 of head size 8: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/hs8.bin: head size 8: flash attention: head size must be 64 or 128"
ckpt model "$tmp/hs16.bin" modern=1 C=32
./train_gpt --train-data "$train" -T 64 --init-from "$tmp/hs16.bin" > "$tmp/out" 2>&1
check "a modern model of head size 16: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/hs16.bin: head size 16: flash attention: head size must be 64 or 128"
if [ -x ./generate ]; then
    ./generate --checkpoint "$tmp/hs8.bin" --tokenizer "$tmp/ds/tokenizer.bin" hello > "$tmp/out" 2>&1
    check "generate, head size 8: $(last "$tmp/out")" says "$tmp/out" "$tmp/hs8.bin: head size 8: flash attention"
fi
end

begin "train_gpt_outputs_apart_before_the_gpu"
# The log and the checkpoint folder, however spelled, clash before either is made; a resume with
# no step left to do is refused.
data="--model d2 --context 64 -T 64"
mkdir -p "$tmp/apart"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $data $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<CASES
--out-dir $tmp/apart/x --log $tmp/apart/x|--log $tmp/apart/x: is the checkpoint folder (--out-dir $tmp/apart/x)
--out-dir $tmp/apart/x/ --log $tmp/apart/./x|--log $tmp/apart/./x: is the checkpoint folder
--log $tmp/apart/a --out-dir $tmp/apart/a/b|--log $tmp/apart/a: the checkpoint folder --out-dir $tmp/apart/a/b would be inside it
--log $tmp/apart/a --out-dir $tmp/apart/missing/../a/b/c|--log $tmp/apart/a: the checkpoint folder
--out-dir $tmp/apart/y --log $tmp/apart/y/model_00000010.bin|--log $tmp/apart/y/model_00000010.bin: is a checkpoint's name in --out-dir $tmp/apart/y
--out-dir $tmp/apart/y --log $tmp/apart/y/log.csv|no CUDA device
--out-dir $tmp/apart/y --log $tmp/apart/y/model_log.bin|no CUDA device
CASES
check "nothing made: $(ls "$tmp/apart" | tr '\n' ' ')" test -z "$(ls "$tmp/apart")"
ln -s apart "$tmp/apart_link"
./train_gpt --train-data "$train" $data --out-dir "$tmp/apart/z" --log "$tmp/apart_link/z" > "$tmp/out" 2>&1
check "through a link: $(last "$tmp/out")" says "$tmp/out" "--log $tmp/apart_link/z: is the checkpoint folder"
pair "$tmp/good" --
resume "$tmp/good" --log "$tmp/good/state_00000009.bin"
check "--resume with a checkpoint's name as --log: $(last "$tmp/out")" says "$tmp/out" \
    "--log $tmp/good/state_00000009.bin: is a checkpoint's name in --resume $tmp/good"
for steps in 5 4; do
    resume "$tmp/good" --steps $steps
    check "--resume at step 5, --steps $steps: $(last "$tmp/out")" says "$tmp/out" \
        "--resume $tmp/good: the run is at step 5 already, so --steps $steps leaves it nothing to do"
done
end

begin "train_gpt_state_counts_up_to_the_largest_int"
# The state's int fields are bounded as integers: --steps 2147483647 resumes, a step and Adam
# step near 2^31 too; an Adam step past the step, a slot past the fields, a momentum of 1 and a
# weight decay that erases the weights do not, each named.
pair "$tmp/r" -- steps=2147483647
resume "$tmp/r" --steps 2147483647
check "--steps 2147483647: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
pair "$tmp/r" -- steps=2147483647 step=2147483646
resume "$tmp/r" --steps 2147483647
check "step and Adam step 2^31 - 2: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
pair "$tmp/r" -- adam_t=6
resume "$tmp/r"
check "an Adam step past the step: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: the step counts are out of range"
pair "$tmp/r" -- slot=100:1
resume "$tmp/r"
check "slot 100 set: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: slot 100 holds 1, past the fields every slot is 0"
pair "$tmp/r" -- muon=1 slot=33:1065353216
resume "$tmp/r" --optimizer muon
check "a Muon momentum of 1: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: --muon-momentum 1 must be in \[0, 1)"
pair "$tmp/r" -- slot=17:1176256512
resume "$tmp/r"
check "a weight decay of 10000: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: --weight-decay 10000: times --lr 0.5"
end

begin "train_gpt_options_without_effect_refused"
# An option that would change the model's description and not what it computes is refused
# (gpt/config.h's gpt_config_drop_without_effect says which); a header's soft cap below 1, which
# flattens every logit, is corrupt.
data="--model d2 --context 64 -T 64"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $data $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<'CASES'
--rotary-base 5000|the model (.*learned positions (rotary base 5000).*): a rotary base without rotary, where it has no effect
--arch modern --rotary 0 --rotary-base 5000|the model (.*): a rotary base without rotary
--arch modern --rotary-base 5000|no CUDA device
--rotary-base 10000|no CUDA device
--window 64|the model (.*context 64, gpt2, windows 64): a window is no narrower than the context
--window 100000|the model (.*): a window is no narrower than the context
--window 63|no CUDA device
--window-pattern 8,64|the model (.*): a window is no narrower than the context
--window-pattern full|no CUDA device
--window-pattern 8,16,32|the model (.*): the window pattern is longer than the layers
--window-pattern 8,full|no CUDA device
CASES
pair "$tmp/r" modern=1 slot=16:1056964608 -- modern=1
resume "$tmp/r"
check "a softcap of 0.5 in the header: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/model_00000005.bin: corrupt header: the softcap must be 0 (none) or a finite number of at least 1"
end

begin "train_gpt_model_files_read_without_their_fields_without_effect"
# A model file (version 7) holding a field without effect is read as the model it computes,
# the field dropped (gpt/config.h's gpt_config_drop_without_effect): started from, resumed with
# its training state, generated and evaluated with; the architecture it is read as is the one an
# option asking for another is compared with, and named.
bits5000=1167867904   # 5000.0f
bits10000=1176256512  # 10000.0f
while IFS='|' read -r name model read; do
    ckpt model "$tmp/$name.bin" $model
    ./train_gpt --train-data "$train" -T 64 --init-from "$tmp/$name.bin" > "$tmp/out" 2>&1
    check "--init-from $name: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
    ./train_gpt --train-data "$train" -T 64 --init-from "$tmp/$name.bin" --window 4 > "$tmp/out" 2>&1
    check "--init-from $name --window 4: $(last "$tmp/out")" says "$tmp/out" \
        "the architecture asked for (.*) is not that of $tmp/$name.bin ($read)\$"
    state=$([ "${model#*modern=1}" != "$model" ] && echo modern=1)
    pair "$tmp/$name" $model -- $state
    resume "$tmp/$name"
    check "--resume $name: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
    resume "$tmp/$name" --window 4
    check "--resume $name --window 4: $(last "$tmp/out")" says "$tmp/out" \
        "the architecture asked for (.*) is not that of $tmp/$name ($read)\$"
    if [ -x ./generate ]; then
        ./generate --checkpoint "$tmp/$name.bin" --tokenizer "$tmp/ds/tokenizer.bin" hello > "$tmp/out" 2>&1
        check "generate $name: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
    fi
    if [ -x ./evaluate ]; then
        ./evaluate --checkpoint "$tmp/$name.bin" --tokenizer "$tmp/ds/tokenizer.bin" \
            --hellaswag tests/data/hellaswag_tiny.jsonl > "$tmp/out" 2>&1
        check "evaluate $name: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
    fi
done <<CASES
gpt2_base5000|slot=1:7,9:$bits5000,13:1|gpt2
gpt2_window64|slot=1:7,9:$bits10000,13:1,19:1,20:64|gpt2
gpt2_window100000|slot=1:7,9:$bits10000,13:1,19:2,20:100000,21:100000|gpt2
modern_window_pattern_8_100|modern=1 slot=19:2,20:8,21:100|modern, windows 8,full
modern_3_windows_on_2_layers|modern=1 slot=19:3,20:8,21:16,22:32|modern, windows 8,16
modern_past_the_layers_alone|modern=1 slot=19:3,22:32|modern
modern_full_windows|modern=1 slot=19:2|modern
CASES
end

begin "train_gpt_optimizer_settings_belong_to_the_run"
# A fresh run's defaults are --arch's, else the preset nearest the architecture's, and it says
# which; a resumed run takes every setting not given from its state (--optimizer too).
data="--model d2 --context 64 -T 64"
defaults() {  # defaults <label> <the start of the optimizer line> <its source> [options]
    local label=$1 line=$2 source=$3; shift 3
    ./train_gpt --train-data "$train" "$@" > "$tmp/out" 2>&1
    check "$label: $(grep '^optimizer' "$tmp/out" || last "$tmp/out")" \
        grep -q -- "^optimizer: $line.*; settings not given: $source" "$tmp/out"
    check "$label, then the GPU: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
}
defaults "--arch modern --softcap 0" "AdamW lr 0.002, betas (0.9, 0.95);" "modern's defaults (--arch modern)" $data --arch modern --softcap 0
defaults "--arch modern --qk-norm 0, muon" "Muon lr 0.02, .* lr 0.05 for the embeddings" \
    "modern's defaults (--arch modern)" $data --arch modern --qk-norm 0 --optimizer muon
defaults "modern's components but the cap" "AdamW lr 0.002, betas (0.9, 0.95);" "modern's defaults (the preset nearest the architecture)" \
    $data --rotary 1 --norm rms --qk-norm 1 --mlp relu2 --bias 0 --head untied --zero-init 1
defaults "GPT-2 with rotary" "AdamW lr 0.0003, betas (0.9, 0.95);" "gpt2's defaults (the preset nearest the architecture)" $data --rotary 1
defaults "--arch gpt2 with modern's components" "AdamW lr 0.0003, betas (0.9, 0.95);" "gpt2's defaults (--arch gpt2)" $data --arch gpt2 \
    --rotary 1 --norm rms --qk-norm 1 --mlp relu2 --bias 0 --head untied --zero-init 1 --softcap 30
ckpt model "$tmp/uncapped.bin" modern=1 slot=16:0
defaults "--init-from modern without its cap" "AdamW lr 0.002, betas (0.9, 0.95);" "modern's defaults (the preset nearest" \
    -T 64 --init-from "$tmp/uncapped.bin"
defaults "--init-from modern without its cap, muon" "Muon .* lr 0.05 for the embeddings" "modern's defaults" \
    -T 64 --init-from "$tmp/uncapped.bin" --optimizer muon
# Resumed with none of the optimizer's settings: the state's (lr 0.002, weight decay and clip 0.5).
schedule="-B 1 -T 64 --steps 10 --min-lr-frac 0.5 --warmup-steps 2 --seed 7"
pair "$tmp/uncapped" modern=1 slot=16:0 -- modern=1 lr=0.002
defaults "--resume an uncapped modern run" "AdamW lr 0.002, betas (0.9, 0.95); warmup 2, cosine to 0.5 x lr, weight decay 0.5, grad clip 0.5" \
    "the run's own ($tmp/uncapped/state_00000005.bin)" $schedule --resume "$tmp/uncapped"
defaults "--resume it with its --lr" "AdamW lr 0.002, betas (0.9, 0.95);" "the run's own" $schedule --resume "$tmp/uncapped" --lr 0.002
./train_gpt --train-data "$train" $schedule --resume "$tmp/uncapped" --lr 0.0003 > "$tmp/out" 2>&1
check "--resume it with another --lr: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/uncapped: the run used --lr 0.002, this one asks for --lr 0.0003"
pair "$tmp/muon" -- muon=1
defaults "--resume a Muon run without --optimizer" \
    "Muon lr 0.5, momentum 0.9 (Nesterov) for the blocks' matrices; Adam (0.8, 0.95) lr 0.001 for the embeddings, 0.002 for the vectors" \
    "the run's own" $schedule --resume "$tmp/muon"
./train_gpt --train-data "$train" $schedule --resume "$tmp/muon" --adam-beta1 0.9 > "$tmp/out" 2>&1
check "--resume it with another beta: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/muon: the run used --adam-beta1 0.8, this one asks for --adam-beta1 0.9"
pair "$tmp/good" --
./train_gpt --train-data "$train" $schedule --resume "$tmp/good" --muon-momentum 0.9 > "$tmp/out" 2>&1
check "--resume an AdamW run with Muon's setting: $(last "$tmp/out")" says "$tmp/out" \
    "--muon-momentum is a setting of --optimizer muon"
./train_gpt --help > "$tmp/out" 2>&1
check "--help states the rule" grep -q "the defaults of.*the preset nearest the architecture" "$tmp/out"
end


begin "train_gpt_step_schedule"
# The schedule's options: each refused in one line where its shape or the optimizer does not take
# it, out of its bounds, or without effect in the run (a linear decay of no weight decay, Muon's
# momentum cool-down longer than the run or inside its warm-up); the optimizer's line says the
# schedule. A run of a schedule of its own
# (its state a version 3 file, the schedule in slots 39-45) resumes with it, and is refused
# without it naming the option; a version 1 file with a schedule is corrupt. --help sets each
# option apart from its text, the long ones too.
data="--model d2 --context 64 -T 64"
./train_gpt --help > "$tmp/out" 2>&1
run_in=$(awk '/^  -/ && length($0) > 26 && substr($0, 26, 1) != " " && NF > 2' "$tmp/out")
check "--help: an option runs into its text: $run_in" test -z "$run_in"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $data $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<'EOF'
--lr-schedule step|--lr-schedule step: expected cosine or wsd
--warmdown-frac 0.5|--warmdown-frac is a setting of --lr-schedule wsd
--lr-schedule wsd --warmdown-frac 0|--warmdown-frac 0 must be in (0, 1]
--lr-schedule wsd --warmdown-frac 1.5|--warmdown-frac 1.5 must be in (0, 1]
--lr-schedule wsd --warmdown-frac 1|no CUDA device
--momentum-warmup-steps 10|--momentum-warmup-steps is a setting of --optimizer muon
--momentum-end 0.9|--momentum-end is a setting of --optimizer muon
--optimizer muon --momentum-start 0.9|--momentum-start without --momentum-warmup-steps has no effect
--optimizer muon --momentum-cooldown-steps 5 --momentum-end 1|--momentum-end 1 must be in \[0, 1)
--optimizer muon --momentum-warmup-steps -1|--momentum-warmup-steps -1: expected an integer from 0 to
--weight-decay-schedule cosine|--weight-decay-schedule cosine: expected constant or linear
--weight-decay-schedule linear|no CUDA device
--optimizer muon --weight-decay-schedule linear|--weight-decay-schedule linear without --weight-decay has no effect
--arch 2026 --weight-decay 0 --weight-decay-schedule linear|--weight-decay-schedule linear without --weight-decay has no effect
--optimizer muon --momentum-cooldown-steps 11 --steps 10|--momentum-cooldown-steps 11 is longer than the run (10 steps)
--optimizer muon --momentum-cooldown-steps 10 --steps 10|no CUDA device
--arch 2026 --momentum-cooldown-steps 5 --steps 300|--momentum-cooldown-steps 5 has no effect: the momentum's warm-up (--momentum-warmup-steps 300) lasts the whole run (300 steps)
--arch 2026 --momentum-cooldown-steps 5 --steps 301|no CUDA device
EOF
./train_gpt --train-data "$train" $data --optimizer muon --lr-schedule wsd --min-lr-frac 0.05 --steps 400 \
    --momentum-warmup-steps 300 --momentum-cooldown-steps 50 --weight-decay 0.1 --weight-decay-schedule linear \
    > "$tmp/out" 2>&1
check "the optimizer's line of a schedule: $(grep '^optimizer' "$tmp/out" || last "$tmp/out")" grep -qF -- "; warmup 0, \
constant, then linear to 0.05 x lr over the last 65% of the steps, weight decay 0.1 down to 0 at the end, momentum \
from 0.85 over the first 300 steps, momentum down to 0.85 over the last 50 steps, grad clip 1; settings not given" \
    "$tmp/out"
pair "$tmp/wsd" -- "slot=1:3,39:1,40:bits 0.65"
resume "$tmp/wsd" --lr-schedule wsd
check "a wsd run resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
# The settings a preset gives, not given, are the resumed run's own; given, they must be.
resume "$tmp/wsd"
check "a wsd run resumed without its schedule: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
while IFS='|' read -r asked error; do
    resume "$tmp/wsd" $asked
    check "a wsd run resumed with '$asked': $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/wsd: $error"
done <<'EOF'
--lr-schedule cosine|the run used --lr-schedule wsd, this one asks for --lr-schedule cosine
--lr-schedule wsd --warmdown-frac 0.5|the run used --warmdown-frac 0.65, this one asks for --warmdown-frac 0.5
--warmdown-frac 0.5|the run used --warmdown-frac 0.65, this one asks for --warmdown-frac 0.5
EOF
pair "$tmp/r" -- "slot=39:1,40:bits 0.65"
resume "$tmp/r" --lr-schedule wsd
check "a schedule in a version 1 file: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: the version is not the schedule's"
pair "$tmp/momentum" -- muon=1 "slot=1:3,41:300,42:bits 0.85,45:1"
resume "$tmp/momentum" $muon --momentum-warmup-steps 300 --weight-decay-schedule linear
check "a run of Muon's momentum warm-up resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/momentum" $muon --weight-decay-schedule linear
check "that run resumed without its momentum warm-up: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
while IFS='|' read -r asked error; do
    resume "$tmp/momentum" $muon $asked
    check "that run resumed with '$asked': $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/momentum: $error"
done <<'EOF'
--momentum-warmup-steps 100 --weight-decay-schedule linear|the run used --momentum-warmup-steps 300, this one asks for --momentum-warmup-steps 100
--momentum-warmup-steps 300 --momentum-start 0.8 --weight-decay-schedule linear|the run used --momentum-start 0.85, this one asks for --momentum-start 0.8
--momentum-warmup-steps 300|the run used --weight-decay-schedule linear, this one asks for --weight-decay-schedule constant
EOF
# A run whose state records a linear decay of no weight decay goes on as it ran.
pair "$tmp/r" -- muon=1 "slot=1:3,17:bits 0,45:1"
resume "$tmp/r" $muon --weight-decay 0 --weight-decay-schedule linear
check "a linear decay of no weight decay resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
end

begin "train_gpt_muon_variants"
# Muon's variants (--muon-qkv, --muon-ns, --cautious-weight-decay, --normuon, --normuon-beta2):
# each refused in one line under AdamW, out of range or without effect, head pairs of an odd head
# count refused; the optimizer's line says those taken. A run of them (its state a version 5 file,
# them in slots 48-52) resumes with its own when none is given, and is refused naming the one
# asked otherwise; a version 2 file with them, or one with head pairs of an odd count, is corrupt.
data="--model d2 --context 64 -T 64"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $data $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<'EOF'
--muon-qkv split|--muon-qkv is a setting of --optimizer muon
--muon-ns polar|--muon-ns is a setting of --optimizer muon
--cautious-weight-decay|--cautious-weight-decay is a setting of --optimizer muon
--normuon|--normuon is a setting of --optimizer muon
--normuon-beta2 0.9|--normuon-beta2 is a setting of --optimizer muon
--optimizer muon --muon-qkv pairs|--muon-qkv pairs: expected fused, split or head-pairs
--optimizer muon --muon-ns cubic|--muon-ns cubic: expected quintic or polar
--optimizer muon --normuon-beta2 0.9|--normuon-beta2 without --normuon has no effect
--optimizer muon --normuon --normuon-beta2 1|--normuon-beta2 1 must be in \[0, 1)
--optimizer muon --normuon --normuon-beta2 -0.5|--normuon-beta2 -0.5 must be in \[0, 1)
--optimizer muon --cautious-weight-decay|--cautious-weight-decay without --weight-decay has no effect
--optimizer muon --model d48 --muon-qkv head-pairs|--muon-qkv head-pairs: the model's heads are an odd count
--optimizer muon --model d48 --muon-qkv split|no CUDA device
--optimizer muon --muon-qkv head-pairs --muon-ns polar --normuon --normuon-beta2 0 --cautious-weight-decay --weight-decay 0.1|no CUDA device
EOF
./train_gpt --train-data "$train" $data --optimizer muon --muon-qkv split --muon-ns polar --normuon \
    --cautious-weight-decay --weight-decay 0.1 > "$tmp/out" 2>&1
check "the optimizer's line of the variants: $(grep '^optimizer' "$tmp/out" || last "$tmp/out")" grep -qF -- \
    "for the blocks' matrices (qkvw as q, k and v, Polar Express, NorMuon beta2 0.95, cautious weight decay); Adam" \
    "$tmp/out"
./train_gpt --train-data "$train" $data --optimizer muon > "$tmp/out" 2>&1
check "the optimizer's line without them: $(grep '^optimizer' "$tmp/out" || last "$tmp/out")" grep -qF -- \
    "for the blocks' matrices; Adam" "$tmp/out"
# A run of q, k and v and NorMuon at 0.95 (slots 48-52; version 5).
pair "$tmp/variants" -- muon=1 "slot=1:5,48:1,51:1,52:bits 0.95"
resume "$tmp/variants" $muon
check "a run of Muon's variants resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
check "that run's variants said: $(grep '^optimizer' "$tmp/out")" grep -qF -- "(qkvw as q, k and v, NorMuon beta2 0.95)" \
    "$tmp/out"
while IFS='|' read -r asked error; do
    resume "$tmp/variants" $muon $asked
    check "that run resumed with '$asked': $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/variants: $error"
done <<'EOF'
--muon-qkv fused|the run used --muon-qkv split, this one asks for --muon-qkv fused
--muon-ns polar|the run used --muon-ns quintic, this one asks for --muon-ns polar
--normuon-beta2 0.9|the run used --normuon-beta2 0.95, this one asks for --normuon-beta2 0.9
EOF
resume "$tmp/variants" $muon --muon-qkv split --normuon --normuon-beta2 0.95
check "that run resumed with its own given: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
pair "$tmp/r" -- muon=1 "slot=48:1"
resume "$tmp/r" $muon
check "variants in a version 2 file: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: the version is not that of Muon's variants"
pair "$tmp/r" NH=3 C=192 -- NH=3 C=192 muon=1 "slot=1:5,48:2"
resume "$tmp/r" $muon
check "head pairs of 3 heads in a state: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: --muon-qkv head-pairs: the model's heads are an odd count"
pair "$tmp/r" -- "slot=1:5,48:1"
resume "$tmp/r"
check "an AdamW run with a variant: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: an AdamW run with Muon's settings"
end

begin "train_gpt_fp8"
# --fp8 and its settings: a list other than of mlp and head, a setting without --fp8, sizes that
# FP8 operands do not take, delayed scaling on several ranks, each refused in one line; with
# --attention naive and --recompute it passes every check. A run of FP8 (its state a version 6
# file, the settings in slots 53-55, delayed scaling's states after the arrays: 2 per FP8 matmul,
# the 2 layers' 4 and the head) resumes with its own when none is given and is refused naming the
# one asked otherwise; its state without the FP8 states, or with one not finite, is refused; FP8
# in a version 5 file is corrupt.
data="--model d2 --context 64 -T 64"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $data $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<'EOF'
--fp8 mlp,mlp|--fp8 'mlp,mlp': expected none or a comma-separated list of mlp and head
--fp8 attention|--fp8 'attention': expected none or a comma-separated list of mlp and head
--fp8 mlp,|--fp8 'mlp,': expected none or a comma-separated list of mlp and head
--fp8-scaling delayed|--fp8-scaling without --fp8 has no effect
--fp8 none --fp8-grad bf16|--fp8-grad without --fp8 has no effect
--fp8 mlp --fp8-scaling late|--fp8-scaling late: expected current or delayed
--fp8 mlp --fp8-grad e4m3|--fp8-grad e4m3: expected e5m2 or bf16
--fp8 mlp -B 1 -T 40|--fp8 mlp: FP8 matmuls need the rows of a micro-step (B \* T per rank) a multiple of 16
--fp8 head --classifier-chunk 100|--fp8 head: the FP8 head needs --classifier-chunk a multiple of 16
--fp8 mlp --classifier-chunk 100|no CUDA device
--fp8 mlp,head --fp8-scaling delayed --fp8-grad bf16 --attention naive --recompute gelu,layernorm|no CUDA device
--fp8 head,mlp --arch modern|no CUDA device
EOF
MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 ./train_gpt --train-data "$train" $data \
    --fp8 mlp --fp8-scaling delayed > "$tmp/out" 2>&1
check "delayed scaling on 2 ranks: $(last "$tmp/out")" says "$tmp/out" \
    "--fp8-scaling delayed: each of the 2 ranks would keep amax histories of its own"
# A run of FP8 MLP and head with delayed scaling (slots 53-55: 3, 1, 0; version 6).
pair "$tmp/fp8" -- "slot=1:6,53:3,54:1" fp8_states=10
resume "$tmp/fp8"
check "a run of FP8 resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/fp8" --fp8 mlp,head --fp8-scaling delayed --fp8-grad e5m2
check "that run resumed with its own given: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
while IFS='|' read -r asked error; do
    resume "$tmp/fp8" $asked
    check "that run resumed with '$asked': $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/fp8: $error"
done <<'EOF'
--fp8 mlp|the run used --fp8 mlp,head, this one asks for --fp8 mlp
--fp8 none|the run used --fp8 mlp,head, this one asks for --fp8 none
--fp8-scaling current|the run used --fp8-scaling delayed, this one asks for --fp8-scaling current
--fp8-grad bf16|the run used --fp8-grad e5m2, this one asks for --fp8-grad bf16
EOF
pair "$tmp/r" -- "slot=1:6,53:3,54:1"
resume "$tmp/r"
check "its state without the FP8 states: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: .* bytes, expected .*truncated"
pair "$tmp/r" -- "slot=1:6,53:3,54:1" fp8_states=10 fp8_nan=7
resume "$tmp/r"
check "an FP8 state not finite: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: an FP8 amax is not a finite number >= 0 (FP8 state 7): corrupt training state"
pair "$tmp/r" -- "slot=1:6,53:1"
resume "$tmp/r"
check "a run of FP8 MLP, current scaling, no FP8 states: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
resume "$tmp/good" --fp8 mlp
check "a run without FP8 resumed with it: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/good: the run used --fp8 none, this one asks for --fp8 mlp"
pair "$tmp/r" -- "slot=1:5,53:1"
resume "$tmp/r"
check "FP8 in a version 5 file: $(last "$tmp/out")" says "$tmp/out" \
    "$tmp/r/state_00000005.bin: corrupt training state header: the version is not FP8's"
end

begin "train_gpt_init_group_betas_and_head_size"
# --init nanochat draws nanochat's initial model (--save-init's file: wte N(0, 0.8), the head
# N(0, 0.001), qkvw and fcw uniform of std 1/sqrt(C) and 0.4/sqrt(C), the projections zero, the
# lambdas from 1.15 and 0.2 to 1.05 and 0.05), and is refused with --init-from. Muon's groups'
# betas (--embedding-beta1 and the others) are refused under AdamW, out of range, and the head's
# with a tied head; the optimizer's line says them. Both are recorded in a version 7 state (slots
# 56-61): a run resumes with them when none is given and is refused naming the one asked
# otherwise; a version 5 file with them, or an AdamW one, is corrupt. --head-size 128 keeps C:
# NH = C / 128, refused where C is not a multiple or a checkpoint's heads differ.
data="--model d2 --context 64 -T 64"
./train_gpt --train-data "$train" $data --arch modern --residual-lambdas 1 --init nanochat --seed 3 \
    --save-init "$tmp/init/nanochat.bin" > "$tmp/out" 2>&1
check "--init nanochat --save-init: $(tail -1 "$tmp/out")" has_line "$tmp/out" \
    "initial model (seed 3, nanochat's init): $tmp/init/nanochat.bin"
"$PYTHON" - "$tmp/init/nanochat.bin" > "$tmp/init/check" 2>&1 <<'PY'
import sys
sys.path.insert(0, "scripts")
from gpt2_checkpoint import Checkpoint
c = Checkpoint(sys.argv[1])
C = c.shape.C
for sl, v in c.slices():
    name = sl.hf_name
    if name in ("wte.weight", "lm_head.weight"):
        assert not v[300:].any(), "a padding row is not zero"
        std = 0.8 if name == "wte.weight" else 0.001
        v = v[:300]
        assert abs(v.std() / std - 1) < 0.05 and abs(v.mean()) < 0.05 * std, (name, v.mean(), v.std())
    elif name.endswith(("c_attn.weight", "c_fc.weight")):  # uniform of std 1/sqrt(C), 0.4/sqrt(C)
        std = (1.0 if "c_attn" in name else 0.4) / C ** 0.5
        assert abs(v.std() / std - 1) < 0.05 and abs(v).max() <= 3 ** 0.5 * std * 1.004, (name, v.std(), abs(v).max())
    elif name.endswith("c_proj.weight"):
        assert not v.any(), name
    elif "lambda" in name:
        layer = int(name.split(".")[1])
        want = {"resid": (1.15, 1.05), "x0": (0.2, 0.05)}[name.split(".")[2].split("_")[0]][layer]
        assert abs(v[0] - want) < 0.01 * want, (name, v, want)
    else:
        raise AssertionError(f"a tensor of another kind: {name}")
print("ok")
PY
check "nanochat's init: $(tail -1 "$tmp/init/check")" test "$(cat "$tmp/init/check")" = ok
./train_gpt --train-data "$train" $data --arch modern --residual-lambdas 1 --seed 3 --save-init "$tmp/init/default.bin" \
    > "$tmp/out" 2>&1
check "the default init draws another model" not cmp -s "$tmp/init/nanochat.bin" "$tmp/init/default.bin"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $data $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<EOF
--init xavier|--init xavier: expected default or nanochat
--init nanochat --init-from $tmp/init/default.bin|--init draws the initial model, which --init-from reads from its checkpoint: it has no effect
--init default --init-from $tmp/init/default.bin|--init draws the initial model, which --init-from reads from its checkpoint
--init nanochat|no CUDA device
--embedding-beta1 0.9|--embedding-beta1 is a setting of --optimizer muon
--arch modern --head-beta2 0.96|--head-beta2 is a setting of --optimizer muon
--optimizer muon --head-beta1 0.8|--head-beta1: the model's head is wte (--head tied), at --embedding-lr
--optimizer muon --embedding-beta2 1|--embedding-beta2 1 must be in \[0, 1)
--optimizer muon --arch modern --head-beta1 -0.1|--head-beta1 -0.1 must be in \[0, 1)
--optimizer muon --arch modern --embedding-beta2 0.995 --head-beta2 0.96|no CUDA device
--head-size 96|--head-size 96: expected 64 or 128
--model d48 --head-size 128|--head-size 128: --model d48's 1600 channels are not a multiple of it
--head-size 128|no CUDA device
--head-size 64 --init-from $tmp/init/default.bin|no CUDA device
--head-size 128 --init-from $tmp/init/default.bin|--model d2 (L 2 C 128 NH 1) does not match $tmp/init/default.bin (L 2 C 128 NH 2)
EOF
./train_gpt --train-data "$train" -T 64 --head-size 128 --init-from "$tmp/init/default.bin" > "$tmp/out" 2>&1
check "--head-size 128 from a model of head size 64: $(last "$tmp/out")" says "$tmp/out" \
    "--head-size 128 does not match $tmp/init/default.bin (head size 64)"
./train_gpt --train-data "$train" $data --optimizer muon --arch modern --embedding-beta2 0.995 --head-beta2 0.96 \
    > "$tmp/out" 2>&1
check "the groups' betas said: $(grep '^optimizer' "$tmp/out" || last "$tmp/out")" grep -qF -- \
    "lr 0.05 for the embeddings (betas 0.8, 0.995), 0.002 for the head (betas 0.8, 0.96), 0.002 for the vectors" \
    "$tmp/out"
./train_gpt --train-data "$train" $data --optimizer muon --adam-beta1 0.7 > "$tmp/out" 2>&1
check "the groups' betas follow --adam-beta1: $(grep '^optimizer' "$tmp/out" || last "$tmp/out")" grep -qF -- \
    "Adam (0.7, 0.95) lr 0.001 for the embeddings, 0.002 for the vectors" "$tmp/out"
./train_gpt --train-data "$train" $data --head-size 128 --save-init "$tmp/init/hs128.bin" > "$tmp/out" 2>&1
check "--head-size 128's model: $(tail -1 "$tmp/out")" \
    "$PYTHON" -c "import sys; sys.path.insert(0, 'scripts'); from gpt2_checkpoint import Checkpoint
s = Checkpoint('$tmp/init/hs128.bin').shape; assert (s.C, s.NH) == (128, 1), s"
# A Muon run of nanochat's init and the embeddings' own betas (0.8, 0.995): version 7.
muon="--optimizer muon --muon-momentum 0.9 --embedding-lr 0.001 --vector-lr 0.002"
pair "$tmp/nanochat" -- muon=1 "slot=1:7,56:1,57:1,58:bits 0.8,59:bits 0.995"
resume "$tmp/nanochat" $muon
check "a version 7 run resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
check "its betas said: $(grep '^optimizer' "$tmp/out")" grep -qF -- "lr 0.001 for the embeddings (betas 0.8, 0.995)" \
    "$tmp/out"
check "its init said" grep -qF -- "init: nanochat's (--init nanochat), the run's start" "$tmp/out"
while IFS='|' read -r asked error; do
    resume "$tmp/nanochat" $muon $asked
    check "that run resumed with '$asked': $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/nanochat: $error"
done <<'EOF'
--init default|the run used --init nanochat, this one asks for --init default
--embedding-beta2 0.99|the run used --embedding-beta2 0.995, this one asks for --embedding-beta2 0.99
--embedding-beta2 0.95|the run used groups' own Adam betas, this one asks for no groups' own Adam betas
EOF
resume "$tmp/nanochat" $muon --init nanochat --embedding-beta1 0.8 --embedding-beta2 0.995
check "that run resumed with its own given: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
pair "$tmp/muon" -- muon=1
resume "$tmp/muon" $muon --embedding-beta2 0.995
check "a version 2 run resumed with betas of the embeddings' own: $(last "$tmp/out")" says "$tmp/out" \
    "--resume $tmp/muon: the run used no groups' own Adam betas, this one asks for groups' own Adam betas"
# (optimizer|slots|error): each state header corrupt in one way.
while IFS='|' read -r optimizer slots error; do
    if [ "$optimizer" = muon ]; then pair "$tmp/r" -- muon=1 "slot=$slots"; else pair "$tmp/r" -- "slot=$slots"; fi
    resume "$tmp/r" $([ "$optimizer" = muon ] && echo $muon)
    check "a $optimizer state with $slots: $(last "$tmp/out")" says "$tmp/out" "$tmp/r/state_00000005.bin: $error"
done <<'EOF'
muon|1:5,48:1,56:1|corrupt training state header: the version is not that of the init and the groups' betas
muon|56:1|corrupt training state header: the version is not that of the init and the groups' betas
muon|1:7|corrupt training state header: the version is not that of the init and the groups' betas
muon|1:6|corrupt training state header: the version is not FP8's
muon|1:7,56:2|corrupt training state header: --init 2 is out of range
muon|1:7,58:bits 0.8|corrupt training state header: the groups' betas are set without their switch
muon|1:7,57:1,58:bits 0.8,59:bits 1|corrupt training state header: --embedding-beta2 1 must be in \[0, 1)
muon|1:7,57:1,58:bits 0.8,59:bits 0.9,60:bits 0.8|corrupt training state header: the head's betas are set without an untied head
adamw|1:7,57:1,58:bits 0.8,59:bits 0.9|corrupt training state header: an AdamW run with Muon's settings
EOF
pair "$tmp/r" -- "slot=1:7,56:1"
resume "$tmp/r" --init nanochat
check "an AdamW run of nanochat's init resumed: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
end

begin "train_gpt_arch_2026"
# --arch 2026: the 2026 recipe's architecture, its key windows a quarter of the context, and its
# optimizer and schedule, each default replaced by its option given; refused in one line at a
# context that leaves a window no key; a checkpoint of it named 2026 and taken with or without
# --arch; a run of it resumed with no option of the preset repeated, and refused with one changed.
data="--model d2 --context 64 -T 64"
line() {  # line <label> <the start of the optimizer line after "optimizer: "> [options]
    local label=$1 want=$2; shift 2
    ./train_gpt --train-data "$train" $data "$@" > "$tmp/out" 2>&1
    check "$label: $(grep '^optimizer' "$tmp/out" || last "$tmp/out")" grep -qF -- "optimizer: $want" "$tmp/out"
    check "$label, then the GPU: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
}
muon_2026="Muon lr 0.02, momentum 0.95 (Nesterov) for the blocks' matrices (qkvw as head pairs, NorMuon beta2 0.95); \
Adam (0.8, 0.95) lr 0.05 for the embeddings, 0.002 for the head, 0.002 for the vectors; warmup 0, constant, then \
linear to 0.05 x lr over the last 65% of the steps, weight decay 0.1, momentum from 0.85 over the first 300 steps, \
grad clip 1; settings not given: 2026's defaults"
line "--arch 2026" "$muon_2026 (--arch 2026)" --arch 2026
line "--arch 2026 --optimizer adamw" "AdamW lr 0.002, betas (0.9, 0.95); warmup 0, constant, then linear to 0.05 x lr \
over the last 65% of the steps, weight decay 0.1, grad clip 1;" --arch 2026 --optimizer adamw
line "--arch 2026, each default given otherwise" "Muon lr 0.03, momentum 0.95 (Nesterov) for the blocks' matrices; \
Adam (0.8, 0.95) lr 0.1 for the embeddings, 0.002 for the head, 0.002 for the vectors; warmup 0, cosine to 0 x lr, \
weight decay 0, grad clip 1;" --arch 2026 --muon-qkv fused --normuon 0 --lr 0.03 --embedding-lr 0.1 --weight-decay 0 \
    --lr-schedule cosine --min-lr-frac 0 --momentum-warmup-steps 0
line "--arch 2026 with its schedule's settings given" "Muon lr 0.02, momentum 0.95 (Nesterov) for the blocks' \
matrices (qkvw as q, k and v, NorMuon beta2 0.9); Adam (0.8, 0.95) lr 0.05 for the embeddings, 0.002 for the head, \
0.002 for the vectors; warmup 0, constant, then linear to 0.1 x lr over the last 50% of the steps, weight decay 0.2, \
momentum from 0.9 over the first 20 steps, grad clip 1;" --arch 2026 --muon-qkv split --normuon-beta2 0.9 \
    --weight-decay 0.2 --warmdown-frac 0.5 --min-lr-frac 0.1 --momentum-warmup-steps 20 --momentum-start 0.9
line "modern with --normuon alone" "Muon lr 0.02, momentum 0.95 (Nesterov) for the blocks' matrices (NorMuon beta2 \
0.95)" --arch modern --optimizer muon --normuon
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $args > "$tmp/out" 2>&1
    check "$args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<'CASES'
--model d2 --context 3 -T 3 --arch 2026|--arch 2026 at context 3, 2 layers: its key windows are the context / 4, rounded down: a context of 3 leaves them no key (give 4 or more)
--model d2 --context 64 -T 64 --arch 2026 --optimizer adamw --momentum-start 0.9|--momentum-start is a setting of --optimizer muon
--model d2 --context 64 -T 64 --arch 2026 --momentum-warmup-steps 0 --momentum-start 0.9|--momentum-start without --momentum-warmup-steps has no effect
--model d2 --context 64 -T 64 --arch 2026 --lr-schedule cosine --warmdown-frac 0.5|--warmdown-frac is a setting of --lr-schedule wsd
--model d2 --context 64 -T 64 --arch 2026 --normuon 2|--normuon 2: expected an integer from 0 to 1
--model d2 --context 64 -T 64 --arch 2026 --window 8 --window-pattern full|--window and --window-pattern exclude each other
CASES
# The windows follow the context: at 512, 128 keys; --window-pattern replaces them, full alone with none.
./train_gpt --train-data "$train" --model d2 --context 512 -T 64 --arch 2026 --save-init "$tmp/2026.bin" > "$tmp/out" 2>&1
check "--arch 2026 --save-init: $(tail -1 "$tmp/out")" has "$tmp/out" "^initial model"
parts="--arch modern --embedding-norm 1 --qk-scale 1.2 --residual-lambdas 1 --value-embeddings 1 --smear 1 --backout 1"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" -T 64 --init-from "$tmp/2026.bin" $args > "$tmp/out" 2>&1
    check "--init-from a 2026 model $args: $(last "$tmp/out")" says "$tmp/out" "$error"
done <<CASES
|no CUDA device
--arch 2026|no CUDA device
$parts --window-pattern 128,full|no CUDA device
$parts --window-pattern 256,full|the architecture asked for (modern, embedding norm, qk scale 1.2, residual lambdas, value embeddings, smear, backout, windows 256,full) is not that of $tmp/2026.bin (2026)
--arch 2026 --window-pattern full|the architecture asked for (modern, embedding norm, qk scale 1.2, residual lambdas, value embeddings, smear, backout) is not that of $tmp/2026.bin (2026)
--arch 2026 --smear 0|the architecture asked for (modern, embedding norm, qk scale 1.2, residual lambdas, value embeddings, backout, windows 128,full) is not that of $tmp/2026.bin (2026)
--arch modern|the architecture asked for (modern) is not that of $tmp/2026.bin (2026)
CASES
./train_gpt --train-data "$train" -T 64 --init-from "$tmp/2026.bin" > "$tmp/out" 2>&1
check "--init-from a 2026 model without --arch: 2026's defaults, the preset nearest" \
    grep -qF -- "optimizer: $muon_2026 (the preset nearest the architecture)" "$tmp/out"
./train_gpt --train-data "$train" --model d2 --context 512 -T 64 $parts --window-pattern 128,full \
    --save-init "$tmp/2026-by-parts.bin" > /dev/null 2>&1
check "--arch 2026 and modern with its parts and windows write one file" cmp "$tmp/2026.bin" "$tmp/2026-by-parts.bin"
# A run of 2026 resumed: its model, and a state of the preset's settings (Muon lr 0.02 and its
# rates, NorMuon, head pairs, weight decay 0.1, grad clip 1, wsd to 0.05 over the last 65%,
# momentum from 0.85 over 300 steps: version 5).
./train_gpt --train-data "$train" $data --arch 2026 --save-init "$tmp/2026-64.bin" > /dev/null 2>&1
vocab=$("$PYTHON" -c "import struct, sys; print(struct.unpack('<8i', open(sys.argv[1], 'rb').read(32))[3])" "$tmp/2026-64.bin")
rm -rf "$tmp/run2026"
mkdir -p "$tmp/run2026"
cp "$tmp/2026-64.bin" "$tmp/run2026/model_00000005.bin"
ckpt state "$tmp/run2026/state_00000005.bin" V="$vocab" modern=1 lambdas=1 values=1 smear=1 backout=1 muon=1 lr=0.02 \
    "slot=1:5,12:0,16:bits 0.05,17:bits 0.1,18:bits 1,33:bits 0.95,34:bits 0.05,38:bits 0.002,39:1,40:bits 0.65,41:300,42:bits 0.85,48:2,51:1,52:bits 0.95"
run2026="-B 1 -T 64 --steps 10 --seed 7"
./train_gpt --train-data "$train" $run2026 --resume "$tmp/run2026" > "$tmp/out" 2>&1
check "a 2026 run resumed with no option of the preset: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
./train_gpt --train-data "$train" $run2026 --arch 2026 --resume "$tmp/run2026" > "$tmp/out" 2>&1
check "a 2026 run resumed with --arch 2026: $(last "$tmp/out")" says "$tmp/out" "no CUDA device"
while IFS='|' read -r args error; do
    ./train_gpt --train-data "$train" $run2026 --resume "$tmp/run2026" $args > "$tmp/out" 2>&1
    check "a 2026 run resumed with $args: $(last "$tmp/out")" says "$tmp/out" "--resume $tmp/run2026: $error"
done <<'CASES'
--lr-schedule cosine|the run used --lr-schedule wsd, this one asks for --lr-schedule cosine
--min-lr-frac 0|the run used --min-lr-frac 0.05, this one asks for --min-lr-frac 0
--momentum-warmup-steps 100|the run used --momentum-warmup-steps 300, this one asks for --momentum-warmup-steps 100
--normuon 0|the run used --normuon, this one asks for no --normuon
CASES
./train_gpt --train-data "$train" $run2026 --arch modern --resume "$tmp/run2026" > "$tmp/out" 2>&1
check "a 2026 run resumed with --arch modern: $(last "$tmp/out")" says "$tmp/out" \
    "the architecture asked for (modern) is not that of $tmp/run2026 (2026)"
./train_gpt --help > "$tmp/out" 2>&1
check "--help names 2026 and its defaults" grep -qF -- "--arch gpt2|modern|2026" "$tmp/out"
check "--help: 2026's windows" grep -qF -- "--window-pattern 256,256,256,full" "$tmp/out"
end

exit $((failures > 0))
