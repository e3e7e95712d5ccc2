#!/usr/bin/env bash
# tests/programs/test_programs.sh: bpe, prepare_data and train_gpt against what can go wrong around their files: a
# dataset rebuilt under a write error or a kill, outputs that are FIFOs, pipes behind
# /dev/stdout, symbolic links, folders or inputs, an --out-dir spelled with slashes and dots or
# one that cannot be replaced (the current folder, a mount point), its mode, group and owner,
# files in it that only look like a dataset's or cannot be kept, inputs that are FIFOs (of
# generate and evaluate too) or shrink while read, shards read with another tokenizer, leftover
# temporaries; make train's check of TEXT and its data folder; make_parity_text.sh's OUT_DIR; train_gpt's checks
# before the GPU (when it is built), its --gpus launch, and that it takes the shards of
# scripts/random_tokens.py. Needs ./bpe and ./prepare_data; prints PASS / FAIL / SKIPPED lines
# like tests/lib/test.h.
set -u
cd "$(dirname "$0")/../.."
tmp=${FLASHGPT_TMP:-/tmp}/programs
rm -rf "$tmp"
mkdir -p "$tmp"
. tests/lib/cases.sh

make_text "$tmp/a.txt" 400 1
make_text "$tmp/b.txt" 400 2
for i in $(seq 40); do cat "$tmp/b.txt"; done > "$tmp/big.txt"
sums() { (cd "$1" && cksum tokenizer.bin train_*.bin val_*.bin) 2>&1; }
# The old dataset in $tmp/ds decodes to the text it was made from.
intact() {
    [ "$(sums "$tmp/ds")" = "$old_sums" ] && [ ! -e "$tmp/ds.tmp"* ] &&
        ./bpe decode --tokenizer "$tmp/ds/tokenizer.bin" --input "$tmp/ds/train_000000.bin" |
        grep -q "$(sed -n 1p "$tmp/a.txt")"
}
./prepare_data --out-dir "$tmp/ds" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>&1
old_sums=$(sums "$tmp/ds")
# Waits until prepare_data, started as $!, has written some shards of its new dataset.
wait_for_shards() {
    for _ in $(seq 500); do
        ls "$1".tmp*/train_000003.bin >/dev/null 2>&1 && return 0
        sleep 0.01
    done
    return 1
}

begin "prepare_data_write_error_keeps_the_old_dataset"
(ulimit -f 64; trap '' XFSZ; exec ./prepare_data --out-dir "$tmp/ds" --vocab-size 400 \
    --split-blank-lines --shard-tokens 100000 "$tmp/big.txt") >/dev/null 2>"$tmp/err"
check "the write error went unnoticed" test $? -ne 0
check "no one-line error: $(cat "$tmp/err" | tail -1)" has "$tmp/err" "^error: .*write failed"
check "the old dataset changed or a temporary is left" intact
end

begin "prepare_data_sigterm_keeps_the_old_dataset"
./prepare_data --out-dir "$tmp/ds" --vocab-size 400 --split-blank-lines --shard-tokens 2000 "$tmp/big.txt" >/dev/null 2>&1 &
pid=$!
check "no shard was written before the kill" wait_for_shards "$tmp/ds"
kill -TERM $pid; wait $pid
check "the old dataset changed or a temporary is left" intact
end

begin "prepare_data_sigkill_keeps_the_old_dataset"
./prepare_data --out-dir "$tmp/ds" --vocab-size 400 --split-blank-lines --shard-tokens 2000 "$tmp/big.txt" >/dev/null 2>&1 &
pid=$!
check "no shard was written before the kill" wait_for_shards "$tmp/ds"
kill -KILL $pid; wait $pid 2>/dev/null
check "the old dataset changed" test "$(sums "$tmp/ds")" = "$old_sums"
check "the unfinished one is not beside it" test -d "$tmp/ds.tmp$pid"
./prepare_data --out-dir "$tmp/ds" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>&1
check "the next run left the dead run's folder" test ! -e "$tmp/ds.tmp$pid"
old_sums=$(sums "$tmp/ds")
check "the rebuilt dataset differs or does not decode" intact
end

begin "prepare_data_interrupted_new_folder_does_not_look_finished"
./prepare_data --out-dir "$tmp/new" --vocab-size 400 --split-blank-lines --shard-tokens 2000 "$tmp/big.txt" >/dev/null 2>&1 &
pid=$!
check "no shard was written before the kill" wait_for_shards "$tmp/new"
# TERM, not INT: a background job of a script ignores SIGINT.
kill -TERM $pid; wait $pid
check "the folder exists" test ! -e "$tmp/new"
check "a temporary is left" test ! -e "$tmp/new.tmp$pid"
end

begin "prepare_data_keeps_other_files_and_replaces_shards"
echo notes > "$tmp/ds/notes.txt"
./prepare_data --out-dir "$tmp/ds" --vocab-size 300 --shard-tokens 100 --val-fraction 0 \
    "$tmp/b.txt" >/dev/null 2>&1
check "notes.txt lost" grep -q notes "$tmp/ds/notes.txt"
./prepare_data --out-dir "$tmp/ds" --vocab-size 300 --val-fraction 0 "$tmp/b.txt" >/dev/null 2>&1
check "old shards left beside the new ones" test ! -e "$tmp/ds/train_000001.bin"
check "an old val shard left" test ! -e "$tmp/ds/val_000000.bin"
end

# The replaced folder's mode (setgid bit included), group and, as root, owner go to the new one,
# and the setgid bit gives the shards its group: a group this user is in (root: any), another
# owner only as root.
begin "prepare_data_keeps_the_folder_mode_group_and_owner"
mkdir -m 700 "$tmp/private"
./prepare_data --out-dir "$tmp/private" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>"$tmp/err"
check "mode 700: $(tail -1 "$tmp/err")" test "$(stat -c %a "$tmp/private")" = 700
mkdir "$tmp/shared"
if [ "$(id -u)" = 0 ]; then group=65534; chown 65534 "$tmp/shared"; else group=$(id -G | tr ' ' '\n' | tail -1); fi
chgrp "$group" "$tmp/shared" && chmod 2750 "$tmp/shared"
want=$(stat -c '%a %u %g' "$tmp/shared")
for run in 1 2; do   # over the empty folder, then over its dataset
    ./prepare_data --out-dir "$tmp/shared" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>"$tmp/err"
    check "run $run: $want became $(stat -c '%a %u %g' "$tmp/shared"): $(tail -1 "$tmp/err")" \
        test "$(stat -c '%a %u %g' "$tmp/shared")" = "$want"
    check "run $run: the shard's group is not $group" test "$(stat -c %g "$tmp/shared/train_000000.bin")" = "$group"
done
end

begin "prepare_data_input_shrinking_is_an_error"
cp "$tmp/big.txt" "$tmp/shrinks.txt"
./prepare_data --out-dir "$tmp/shrunk" --vocab-size 300 --split-blank-lines --shard-tokens 2000 "$tmp/shrinks.txt" \
    >/dev/null 2>"$tmp/err" &
pid=$!
check "no shard was written before the shrink" wait_for_shards "$tmp/shrunk"
truncate -s 100 "$tmp/shrinks.txt"
wait $pid
check "it did not fail" test $? -ne 0
check "no line names the file: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: .*shrinks.txt: the file shrank"
check "a temporary is left" test ! -e "$tmp/shrunk.tmp$pid"
end

begin "prepare_data_val_fraction_advice"
printf 'one paragraph only\n' > "$tmp/one.txt"
./prepare_data --out-dir "$tmp/one" --vocab-size 300 --split-blank-lines "$tmp/one.txt" 2>"$tmp/err"
check "the error suggests the flag that was given" test -z "$(grep -- --split-blank-lines "$tmp/err")"
./prepare_data --out-dir "$tmp/one" --vocab-size 300 "$tmp/one.txt" 2>"$tmp/err"
check "the error does not suggest --split-blank-lines" has "$tmp/err" "--split-blank-lines"
end

begin "prepare_data_removes_only_its_own_files"
mkdir -p "$tmp/look"
./prepare_data --out-dir "$tmp/look" --vocab-size 300 --shard-tokens 1000 --val-fraction 0 \
    "$tmp/a.txt" >/dev/null 2>&1
for f in train_notes.bin tokenizer.bin.txt val_2023.bin train_0000001.bin train_1.bin; do
    cp "$tmp/b.txt" "$tmp/look/$f"
done
./prepare_data --out-dir "$tmp/look" --vocab-size 300 --split-blank-lines "$tmp/look/train_notes.bin" \
    >/dev/null 2>"$tmp/err"
check "it failed: $(tail -1 "$tmp/err")" test $? -eq 0
for f in train_notes.bin tokenizer.bin.txt val_2023.bin train_0000001.bin train_1.bin; do
    check "$f, not its own, was removed or changed" cmp "$tmp/b.txt" "$tmp/look/$f"
done
check "a shard of the old dataset is left" test ! -e "$tmp/look/train_000001.bin"
check "no new dataset" test -s "$tmp/look/val_000000.bin"
end

begin "prepare_data_input_among_the_files_it_replaces_refused"
cp "$tmp/b.txt" "$tmp/look/train_000000.bin"
ln -sf look/train_000000.bin "$tmp/shard_link.txt"
for input in "$tmp/look/train_000000.bin" "$tmp/shard_link.txt"; do
    ./prepare_data --out-dir "$tmp/look" --vocab-size 300 --split-blank-lines "$input" \
        >/dev/null 2>"$tmp/err"
    check "$input accepted" test $? -ne 0
    check "no line says why: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: .*replaces"
    check "it trained first" not has "$tmp/err" "training"
done
check "the input was removed or changed" cmp "$tmp/b.txt" "$tmp/look/train_000000.bin"
end

begin "prepare_data_out_dir_spelled_with_slashes_and_dots"
for dir in "$tmp/slash/ds/" "$tmp/slash/x/../ds//" "$tmp/slash/./ds/."; do
    ./prepare_data --out-dir "$dir" --vocab-size 300 --split-blank-lines "$tmp/a.txt" \
        >/dev/null 2>"$tmp/err"
    check "--out-dir $dir failed: $(tail -1 "$tmp/err")" test $? -eq 0
    check "--out-dir $dir: no dataset in $tmp/slash/ds" test -s "$tmp/slash/ds/train_000000.bin"
    check "--out-dir $dir: a temporary is left" test -z "$(ls -a "$tmp/slash" "$tmp/slash/ds" | grep '\.tmp[0-9]')"
    check "--out-dir $dir: made $tmp/slash/x" test ! -e "$tmp/slash/x"
done
end

begin "prepare_data_out_dir_it_cannot_replace_refused_before_training"
mkdir -p "$tmp/here"
cp "$tmp/a.txt" "$tmp/here/a.txt"
here=$(cd "$tmp/here" && pwd)
for dir in . ./ "$here" "$here/sub/.." / //; do
    (cd "$here" && exec "$OLDPWD/prepare_data" --out-dir "$dir" --vocab-size 300 \
        --split-blank-lines a.txt) >/dev/null 2>"$tmp/err"
    check "--out-dir $dir accepted" test $? -ne 0
    check "--out-dir $dir: no line says why: $(tail -1 "$tmp/err")" \
        has "$tmp/err" "^error: --out-dir .*\(current folder\|mount point\)"
    check "--out-dir $dir: it trained first" not has "$tmp/err" "training"
done
check "the folder changed" test "$(ls -a "$tmp/here" | tr '\n' ' ')" = ". .. a.txt "
end

# A mount point needs a mount namespace of its own (unshare -rm), where the system allows one.
if unshare -rm true 2>/dev/null; then
    begin "prepare_data_out_dir_mount_point_refused_before_training"
    mkdir -p "$tmp/mnt" "$tmp/bound"
    for how in "mount -t tmpfs none" "mount --bind $tmp/bound"; do
        for dir in "$tmp/mnt" "$tmp/mnt/"; do
            unshare -rm sh -c "$how \"\$1\" && exec ./prepare_data --out-dir \"\$1\" --vocab-size 300 \
                --split-blank-lines \"\$2\"" sh "$dir" "$tmp/a.txt" >/dev/null 2>"$tmp/err"
            check "$how, --out-dir $dir: accepted" test $? -ne 0
            check "$how, --out-dir $dir: no line says why: $(tail -1 "$tmp/err")" \
                has "$tmp/err" "^error: --out-dir .*mount point"
            check "$how, --out-dir $dir: it trained first" not has "$tmp/err" "training"
        done
    done
    check "a temporary is left" test -z "$(ls "$tmp" | grep 'mnt\.tmp')"
    end
else
    echo "SKIPPED prepare_data_out_dir_mount_point_refused_before_training (unshare -rm: no mount namespace here)"
fi

# A file of --out-dir that the new folder cannot take (here one mounted on, which no link may
# name; another's file under fs.protected_hardlinks is the same) is found before the training.
if unshare -rm true 2>/dev/null; then
    begin "prepare_data_file_it_cannot_keep_found_before_training"
    ./prepare_data --out-dir "$tmp/keep" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>&1
    echo notes > "$tmp/keep/notes.txt"
    old=$(sums "$tmp/keep")
    unshare -rm sh -c 'mount --bind "$1" "$2/notes.txt" && exec ./prepare_data --out-dir "$2" --vocab-size 300 \
        --split-blank-lines "$3"' sh "$tmp/b.txt" "$tmp/keep" "$tmp/b.txt" >/dev/null 2>"$tmp/err"
    check "accepted" test $? -ne 0
    check "no line says why: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: --out-dir .*cannot keep notes.txt"
    check "it trained first" not has "$tmp/err" "training"
    check "the dataset changed" test "$(sums "$tmp/keep")" = "$old"
    check "notes.txt changed" test "$(cat "$tmp/keep/notes.txt")" = notes
    check "a temporary is left" test -z "$(ls "$tmp" | grep 'keep\.tmp')"
    end
else
    echo "SKIPPED prepare_data_file_it_cannot_keep_found_before_training (unshare -rm: no mount namespace here)"
fi

begin "prepare_data_fifo_input_refused_without_waiting"
mkfifo "$tmp/in_fifo"
timeout 10 ./prepare_data --out-dir "$tmp/from_fifo" --vocab-size 300 "$tmp/in_fifo" >/dev/null 2>"$tmp/err"
status=$?
check "it waited for a writer" test "$status" -ne 124
check "a FIFO accepted" test "$status" -ne 0
check "no line says why: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: .*in_fifo: not a regular file"
./prepare_data --out-dir "$tmp/from_dir" --vocab-size 300 "$tmp" >/dev/null 2>"$tmp/err"
check "a folder: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: .*: is a directory"
end

begin "empty_file_names_refused_in_one_line"
# An empty file or folder name is refused naming its flag, before any work.
while IFS='|' read -r expected args; do
    # shellcheck disable=SC2086  # the arguments are words; '' stands for the empty one
    eval "$args" > /dev/null 2> "$tmp/err"
    check "$args: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: $expected\$"
done <<EOF2
--out-dir: empty path|./prepare_data --out-dir '' --vocab-size 300 "$tmp/a.txt"
--tokenizer: empty path|./prepare_data --out-dir "$tmp/e" --tokenizer '' "$tmp/a.txt"
--gpt2: empty path|./prepare_data --out-dir "$tmp/e" --gpt2 "$tmp/a.txt" '' "$tmp/a.txt"
an input file's name is empty|./prepare_data --out-dir "$tmp/e" --vocab-size 300 ''
bpe train: --input '': empty path|./bpe train --input '' --vocab-size 300 --out "$tmp/e.tok"
bpe encode: --tokenizer '': empty path|./bpe encode --tokenizer '' --input "$tmp/a.txt" --out "$tmp/e.bin"
bpe decode: --input '': empty path|./bpe decode --tokenizer "$tmp/a.txt" --input ''
EOF2
check "a folder was made" test ! -e "$tmp/e"
end

./bpe train --input "$tmp/a.txt" --vocab-size 300 --out "$tmp/a.tok" 2>/dev/null
./bpe train --input "$tmp/b.txt" --vocab-size 320 --out "$tmp/b.tok" 2>/dev/null

begin "bpe_decode_refuses_another_tokenizer"
./bpe encode --tokenizer "$tmp/a.tok" --input "$tmp/a.txt" --out "$tmp/a.bin" 2>/dev/null
./bpe decode --tokenizer "$tmp/a.tok" --input "$tmp/a.bin" > "$tmp/back.txt"
check "the right tokenizer does not give the text back" cmp "$tmp/a.txt" "$tmp/back.txt"
./bpe decode --tokenizer "$tmp/b.tok" --input "$tmp/a.bin" >/dev/null 2>"$tmp/err"
check "another tokenizer decoded it" test $? -ne 0
check "no line says why: $(cat "$tmp/err")" has "$tmp/err" "a.bin: made by another tokenizer"
end

begin "bpe_out_fifo_written_through"
mkfifo "$tmp/fifo"
cat "$tmp/fifo" > "$tmp/from_fifo" &
reader=$!
./bpe encode --tokenizer "$tmp/a.tok" --input "$tmp/a.txt" --out "$tmp/fifo" 2>/dev/null
wait $reader
check "the FIFO was replaced" test -p "$tmp/fifo"
check "the reader did not get the shard" cmp "$tmp/from_fifo" "$tmp/a.bin"
end

begin "bpe_out_symlink_followed"
: > "$tmp/target.bin"
ln -s target.bin "$tmp/link.bin"
./bpe encode --tokenizer "$tmp/a.tok" --input "$tmp/a.txt" --out "$tmp/link.bin" 2>/dev/null
check "the link was replaced" test -L "$tmp/link.bin"
check "the file it names did not get the shard" cmp "$tmp/target.bin" "$tmp/a.bin"
ln -s missing.tok "$tmp/dangling.tok"
./bpe train --input "$tmp/a.txt" --vocab-size 300 --out "$tmp/dangling.tok" 2>/dev/null
check "a dangling link was not followed" cmp "$tmp/missing.tok" "$tmp/a.tok"
end

begin "bpe_out_stdout_written_in_place"
./bpe train --input "$tmp/a.txt" --vocab-size 300 --out /dev/stdout 2>"$tmp/err" | cat > "$tmp/piped.tok"
check "through a pipe: $(tail -1 "$tmp/err")" cmp "$tmp/piped.tok" "$tmp/a.tok"
./bpe encode --tokenizer "$tmp/a.tok" --input "$tmp/a.txt" --out /proc/self/fd/1 2>"$tmp/err" |
    cat > "$tmp/piped.bin"
check "/proc/self/fd/1, a pipe: $(tail -1 "$tmp/err")" cmp "$tmp/piped.bin" "$tmp/a.bin"
./bpe train --input "$tmp/a.txt" --vocab-size 300 --out /dev/stdout > "$tmp/redirected.tok" 2>"$tmp/err"
check "redirected to a file: $(tail -1 "$tmp/err")" cmp "$tmp/redirected.tok" "$tmp/a.tok"
end

begin "bpe_out_directory_refused_before_training"
./bpe train --input "$tmp/big.txt" --vocab-size 300 --out "$tmp" 2>"$tmp/err"
check "a directory accepted" test $? -ne 0
check "it trained first" test -z "$(grep learned "$tmp/err")"
check "no line says why: $(cat "$tmp/err")" has "$tmp/err" "is a directory"
./bpe train --input "$tmp/a.txt" --vocab-size 300 --out "$tmp/no/such/dir/x.tok" 2>"$tmp/err"
check "it trained before finding --out unwritable" test -z "$(grep learned "$tmp/err")"
end

begin "bpe_output_is_never_an_input"
cp "$tmp/a.txt" "$tmp/keep.txt"
cp "$tmp/a.tok" "$tmp/keep.tok"
ln -s keep.txt "$tmp/keep_link.txt"
check "encode --out = --input accepted" \
    not ./bpe encode --tokenizer "$tmp/a.tok" --input "$tmp/keep.txt" --out "$tmp/keep.txt"
check "encode --out = --input through a link accepted" \
    not ./bpe encode --tokenizer "$tmp/a.tok" --input "$tmp/keep.txt" --out "$tmp/keep_link.txt"
check "encode --out = --tokenizer accepted" \
    not ./bpe encode --tokenizer "$tmp/keep.tok" --input "$tmp/a.txt" --out "$tmp/keep.tok"
check "train --out = --input accepted" \
    not ./bpe train --input "$tmp/keep.txt" --vocab-size 300 --out "$tmp/keep.txt"
check "the text changed" cmp "$tmp/a.txt" "$tmp/keep.txt"
check "the tokenizer changed" cmp "$tmp/a.tok" "$tmp/keep.tok"
end

begin "stale_temporaries_of_dead_processes_removed"
sleep 0 & wait $!
dead=$!
: > "$tmp/a.bin.tmp$dead"
: > "$tmp/a.bin.tmp$$"
./bpe encode --tokenizer "$tmp/a.tok" --input "$tmp/a.txt" --out "$tmp/a.bin" 2>/dev/null
check "a dead process's temporary is left" test ! -e "$tmp/a.bin.tmp$dead"
check "a live process's temporary was removed" test -e "$tmp/a.bin.tmp$$"
end

begin "test_text_a_directory_is_skipped_by_name"
for t in build/tests/unit/data/test_data build/tests/unit/tokenizer/test_tokenizer; do
    FLASHGPT_TEXT="$tmp" "$t" > "$tmp/out" 2>&1
    check "$t: $(grep -v ^PASS "$tmp/out" | head -1)" \
        grep -q "^SKIPPED .*(no TEST_TEXT: $tmp: .*directory)" "$tmp/out"
    check "$t names the variable" not grep -q FLASHGPT "$tmp/out"
done
end

begin "make_train_checks_text_before_making_folders"
had_runs=$([ -d runs ] && echo yes)
mkdir -p "$tmp/text_dir_$$"
for text in "$tmp/no_text_$$.txt" "$tmp/text_dir_$$"; do
    TEXT=$text scripts/train_tinyshakespeare.sh >/dev/null 2>"$tmp/err"
    check "TEXT=$text accepted" test $? -ne 0
    name=$(basename "$text" .txt)
    check "TEXT=$text: made runs/$name" test ! -e "runs/$name"
    rmdir "runs/$name" 2>/dev/null
done
[ -z "$had_runs" ] && rmdir runs 2>/dev/null
TEXT=$tmp/no_text_$$.txt scripts/prepare_tinyshakespeare.sh >/dev/null 2>"$tmp/err"
check "a missing file: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: TEXT=.*: no such file"
TEXT=$tmp/text_dir_$$ scripts/prepare_tinyshakespeare.sh >/dev/null 2>"$tmp/err"
check "a folder: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: TEXT=.*: is a directory"
end

# scripts/make_parity_text.sh python OUT_DIR, on a stand-in for the standard library (python3 on
# PATH says where it is): OUT_DIR the caller's folder or one above it is refused before any work,
# though prepare_data runs from another, and so is an empty one; a folder of its own gets the
# dataset; --help prints the opening comment.
begin "make_parity_text_never_replaces_the_current_folder"
mkdir -p "$tmp/parity/lib" "$tmp/parity/bin" "$tmp/parity/here"
for i in $(seq 6); do cp scripts/compare_curves.py "$tmp/parity/lib/m$i.py"; done
printf '#!/bin/sh\necho "%s"\n' "$tmp/parity/lib" > "$tmp/parity/bin/python3"
chmod +x "$tmp/parity/bin/python3"
echo mine > "$tmp/parity/here/mine.txt"
inode=$(stat -c %i "$tmp/parity/here")
for dir in here:. here:./ here/sub:.. here/sub:../; do
    mkdir -p "$tmp/parity/${dir%%:*}"   # sub only now: prepare_data refuses a folder that holds one
    (cd "$tmp/parity/${dir%%:*}" && PATH="$tmp/parity/bin:$PATH" exec bash "$OLDPWD/scripts/make_parity_text.sh" \
        python "${dir#*:}") >/dev/null 2>"$tmp/err"
    check "OUT_DIR ${dir#*:} in ${dir%%:*} accepted" test $? -ne 0
    check "OUT_DIR ${dir#*:} in ${dir%%:*}: $(tail -1 "$tmp/err")" has "$tmp/err" "^error: OUT_DIR .*current folder"
    check "OUT_DIR ${dir#*:} in ${dir%%:*}: more than one line" test "$(wc -l < "$tmp/err")" = 1
done
check "the folder was replaced" test "$(stat -c %i "$tmp/parity/here")" = "$inode"
check "the folder changed: $(ls "$tmp/parity/here" | tr '\n' ' ')" test "$(ls "$tmp/parity/here" | tr '\n' ' ')" = "mine.txt sub "
(cd "$tmp/parity/here" && PATH="$tmp/parity/bin:$PATH" exec bash "$OLDPWD/scripts/make_parity_text.sh" python ds) \
    >/dev/null 2>"$tmp/err"
check "OUT_DIR ds: $(tail -1 "$tmp/err")" test -s "$tmp/parity/here/ds/val_000000.bin"
bash scripts/make_parity_text.sh python '' > /dev/null 2> "$tmp/err"
check "OUT_DIR '': $(tail -1 "$tmp/err")" \
    test "$(cat "$tmp/err")" = "error: OUT_DIR is empty: name the dataset's folder"
bash scripts/make_parity_text.sh --help > "$tmp/out"
check "--help: $(tail -1 "$tmp/out")" test "$(tail -1 "$tmp/out")" = "which replaces OUT_DIR: not the current folder nor one above it."
end

# make train's run goes to runs/NAME, or when an earlier run has that folder to runs/NAME-2, -3,
# ...: never into another run's files. Without a GPU (nvidia-smi made to list none) it says where
# the run would go and makes no folder.
begin "make_train_takes_a_run_folder_of_its_own"
name=make_train_$$
make_text "$tmp/$name.txt" 40 3
mkdir -p "$tmp/no_gpu"
printf '#!/bin/sh\nexit 0\n' > "$tmp/no_gpu/nvidia-smi"
chmod +x "$tmp/no_gpu/nvidia-smi"
had_runs=$([ -d runs ] && echo yes)
had_datasets=$([ -d datasets ] && echo yes)
would_go_to() {  # would_go_to <folder>: make train says its run would go there, and makes nothing
    local before
    before=$(ls runs 2>/dev/null)
    PATH="$tmp/no_gpu:$PATH" TEXT="$tmp/$name.txt" scripts/train_tinyshakespeare.sh > /dev/null 2> "$tmp/err"
    check "runs/$1 expected: $(tail -1 "$tmp/err")" \
        grep -q "^error: no CUDA device here: .* the run would go to $PWD/runs/$1; " "$tmp/err"
    check "made a folder in runs/ without a GPU" test "$(ls runs 2>/dev/null)" = "$before"
}
would_go_to "$name"
mkdir -p "runs/$name"
would_go_to "$name"   # an empty folder is no run's
echo "an earlier run's log" > "runs/$name/log.csv"
would_go_to "$name-2"
mkdir "runs/$name-2"
: > "runs/$name-2/model_00000350.bin"
would_go_to "$name-3"
check "the earlier run's files changed" test "$(cat "runs/$name/log.csv")" = "an earlier run's log"
check "the data is not ready" test -s "datasets/$name/train_000000.bin"
rm -rf "runs/$name" "runs/$name-2" "datasets/$name"
[ -z "$had_runs" ] && rmdir runs 2>/dev/null
[ -z "$had_datasets" ] && rmdir datasets 2>/dev/null
end

# A text whose name has nothing before its extension (.txt) or leaves "." (..txt) gets a data and
# a run folder of its whole name, never datasets/ or runs/ themselves.
begin "make_train_names_folders_of_a_text_named_.txt"
had_runs=$([ -d runs ] && echo yes)
had_datasets=$([ -d datasets ] && echo yes)
for name in .txt ..txt; do
    mkdir -p "$tmp/dot_$name"
    make_text "$tmp/dot_$name/$name" 40 4
    TEXT="$tmp/dot_$name/$name" scripts/prepare_tinyshakespeare.sh > "$tmp/out" 2> "$tmp/err"
    check "$name: datasets/$name expected: $(cat "$tmp/out") $(tail -1 "$tmp/err")" test "$(cat "$tmp/out")" = "$PWD/datasets/$name"
    check "$name: no data in datasets/$name" test -s "datasets/$name/train_000000.bin"
    check "$name: wrote into datasets/ itself" test ! -e datasets/tokenizer.bin
    PATH="$tmp/no_gpu:$PATH" TEXT="$tmp/dot_$name/$name" scripts/train_tinyshakespeare.sh > /dev/null 2> "$tmp/err"
    check "$name: runs/$name expected: $(tail -1 "$tmp/err")" grep -q "the run would go to $PWD/runs/$name; " "$tmp/err"
    rm -rf "datasets/$name"
done
[ -z "$had_runs" ] && rmdir runs 2>/dev/null
[ -z "$had_datasets" ] && rmdir datasets 2>/dev/null
end

# make train never replaces a dataset it did not make from this very text (one prepare_data
# made, or another text's of the same name): the data goes to the first of datasets/NAME,
# NAME-2, ... that is missing, empty or made from this text, and the run's folder follows it.
begin "make_train_never_replaces_another_dataset"
had_runs=$([ -d runs ] && echo yes)
had_datasets=$([ -d datasets ] && echo yes)
name=own_data_$$
make_text "$tmp/$name.txt" 40 5
mkdir -p "$tmp/elsewhere"
make_text "$tmp/elsewhere/$name.txt" 40 6
./prepare_data --out-dir "datasets/$name" --vocab-size 300 --split-blank-lines "$tmp/a.txt" >/dev/null 2>&1
mine=$(sums "datasets/$name")
prepared() {  # prepared <text> <folder>: prepare_tinyshakespeare.sh puts the text's data in datasets/<folder>
    TEXT=$1 scripts/prepare_tinyshakespeare.sh > "$tmp/out" 2> "$tmp/err"
    check "$1: datasets/$2 expected: $(cat "$tmp/out") $(tail -1 "$tmp/err")" \
        test "$(cat "$tmp/out")" = "$PWD/datasets/$2"
}
prepared "$tmp/$name.txt" "$name-2"
check "no word on the folder taken: $(head -1 "$tmp/err")" has "$tmp/err" "datasets/$name holds data not made from"
prepared "$tmp/elsewhere/$name.txt" "$name-3"
prepared "$tmp/$name.txt" "$name-2"
check "its own data not up to date: $(tail -1 "$tmp/err")" has "$tmp/err" "is up to date"
make_text "$tmp/$name.txt" 41 5   # an edited text is still this text: its data is made again
prepared "$tmp/$name.txt" "$name-2"
check "the edited text's data not made again" has "$tmp/err" "prepare_data: wrote"
echo "text $(realpath "$tmp/$name.txt")" > "datasets/$name-2/prepared_from"   # as a preparation cut short leaves it
prepared "$tmp/$name.txt" "$name-2"
check "data cut short not made again" has "$tmp/err" "prepare_data: wrote"
PATH="$tmp/no_gpu:$PATH" TEXT="$tmp/$name.txt" scripts/train_tinyshakespeare.sh > /dev/null 2> "$tmp/err"
check "runs/$name-2 expected: $(tail -1 "$tmp/err")" grep -q "the run would go to $PWD/runs/$name-2; " "$tmp/err"
check "the dataset prepare_data made changed" test "$(sums "datasets/$name")" = "$mine"
check "the dataset prepare_data made got a stamp" test ! -e "datasets/$name/prepared_from"
mkdir "datasets/$name-e"   # an empty folder is no dataset's
make_text "$tmp/$name-e.txt" 40 7
prepared "$tmp/$name-e.txt" "$name-e"
rm -rf "datasets/$name" "datasets/$name"-*
[ -z "$had_runs" ] && rmdir runs 2>/dev/null
[ -z "$had_datasets" ] && rmdir datasets 2>/dev/null
end

# train_gpt checks its command line and files before it looks for a GPU, so these run anywhere.
if [ -x ./train_gpt ]; then
    begin "train_gpt_checks_before_the_gpu"
    ./prepare_data --out-dir "$tmp/other" --vocab-size 300 --split-blank-lines "$tmp/b.txt" >/dev/null 2>&1
    data="--train-data $tmp/ds/train_*.bin --model d2 --context 64 -T 64"
    ./train_gpt $data --model d99 > "$tmp/out" 2>&1
    check "--model d99: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: --model d99: unknown"
    ./train_gpt $data -T 128 > "$tmp/out" 2>&1
    check "-T past the context: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: -T 128 is longer than"
    ./train_gpt $data -B 0 > "$tmp/out" 2>&1
    check "-B 0: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: -B 0"
    ./train_gpt $data --tokenizer "$tmp/other/tokenizer.bin" > "$tmp/out" 2>&1
    check "shards of another tokenizer: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: --train-data and --tokenizer.*another tokenizer"
    ./train_gpt $data --val-data "$tmp/other/val_*.bin" > "$tmp/out" 2>&1
    check "val shards of another tokenizer: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: --val-data and --train-data"
    ./train_gpt $data --zero 1 > "$tmp/out" 2>&1
    check "--zero 1 without ranks: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: --zero 1"
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 ./train_gpt $data > "$tmp/out" 2>&1
    check "torchrun without MASTER_ADDR: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: MASTER_ADDR"
    # The random shards the GPU scripts time train_gpt on pass its data checks (without a GPU it
    # then stops at "no CUDA device"; with one it trains a step).
    "${PYTHON:-python3}" scripts/random_tokens.py "$tmp/random/random_000000.bin" 5000 2> "$tmp/out"
    check "random_tokens.py failed: $(tail -1 "$tmp/out")" test -s "$tmp/random/random_000000.bin"
    ./train_gpt --train-data "$tmp/random/random_*.bin" --val-data '' --model d2 --context 64 -T 64 -B 1 \
        --steps 1 > "$tmp/out" 2>&1
    refusal=$(grep "^error" "$tmp/out" | grep -v "^error: no CUDA device")
    check "train_gpt refuses a random_tokens.py shard: $refusal" test -z "$refusal"
    end

    # A token id outside the vocabulary halfway into a shard, between the windows the loader
    # samples at open: start-up does not read that far (without a GPU the run stops at "no CUDA
    # device"); with a GPU the batch that reads it stops the run, naming the shard and position.
    begin "train_gpt_stops_at_a_bad_token_when_read"
    mkdir -p "$tmp/bad_token"
    bad="$tmp/bad_token/train_000000.bin"
    cp "$tmp/ds/train_000000.bin" "$bad"
    n=$(od -A n -t d4 -j 8 -N 4 "$bad" | tr -d ' ')
    pos=$((n / 2))
    check "the shard is too short for a token between the sampled windows: $n" test "$n" -gt 1100
    printf '\377\377' | dd of="$bad" bs=1 seek=$((1024 + 2 * pos)) conv=notrunc 2>/dev/null
    bad_data="--train-data $tmp/bad_token/train_*.bin --model d2 --context 64 -T 64 -B 1"
    CUDA_VISIBLE_DEVICES= ./train_gpt $bad_data --val-data '' > "$tmp/out" 2>&1
    check "start-up read the whole shard: $(grep ^error "$tmp/out")" \
        test "$(grep ^error "$tmp/out")" = "error: no CUDA device"
    ./train_gpt $bad_data --val-data '' --out-dir "$tmp/bad_token/run" > "$tmp/out" 2>&1
    if ! has "$tmp/out" "no CUDA device"; then
        check "the bad token trained on or not named: $(grep ^error "$tmp/out" | tr '\n' '|')" \
            test "$(grep ^error "$tmp/out")" = \
            "error: --train-data: $bad: token $pos has id 65535, outside the vocabulary of 300"
        check "the bad token's error is not the last line" test "$(tail -1 "$tmp/out" | cut -c1-6)" = "error:"
    fi
    end

    # A new run's checkpoints would write over another run's of the same steps (and mix with the
    # others): a folder that holds checkpoint files is refused as --out-dir, unless resumed.
    # The devices are hidden, so that each run stops where the GPU would be taken.
    begin "train_gpt_refuses_an_out_dir_of_another_run"
    mkdir -p "$tmp/run" "$tmp/other_files"
    echo model > "$tmp/run/model_00000350.bin"
    echo state > "$tmp/run/state_00000350.bin"
    echo notes > "$tmp/other_files/notes.txt"
    CUDA_VISIBLE_DEVICES= ./train_gpt $data -B 1 --out-dir "$tmp/run" > "$tmp/out" 2>&1
    check "an --out-dir of checkpoints: $(tail -1 "$tmp/out")" \
        grep -qx -- "error: --out-dir $tmp/run holds the checkpoints of another run (2 files, the latest of step 350): --resume $tmp/run continues it; give a new run another --out-dir" "$tmp/out"
    check "the checkpoints were changed" test "$(cat "$tmp/run/model_00000350.bin" "$tmp/run/state_00000350.bin")" = "model
state"
    rm "$tmp/run/state_00000350.bin"
    CUDA_VISIBLE_DEVICES= ./train_gpt $data -B 1 --out-dir "$tmp/run/" > "$tmp/out" 2>&1
    check "a model file alone: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: --out-dir $tmp/run/ holds the checkpoints of another run (1 file, the latest of step 350)"
    CUDA_VISIBLE_DEVICES= ./train_gpt $data -B 1 --out-dir "$tmp/other_files" > "$tmp/out" 2>&1
    check "an --out-dir of other files: $(tail -1 "$tmp/out")" test "$(grep ^error "$tmp/out")" = "error: no CUDA device"
    CUDA_VISIBLE_DEVICES= ./train_gpt $data -B 1 --out-dir "$tmp/new_run" > "$tmp/out" 2>&1
    check "a new --out-dir: $(tail -1 "$tmp/out")" test "$(grep ^error "$tmp/out")" = "error: no CUDA device"
    check "a new --out-dir was made before the GPU" test ! -e "$tmp/new_run"
    end

    # --gpus however abbreviated, and inside a Slurm step of one task (as a batch script is): the
    # ranks start, or one line says why they cannot.
    begin "train_gpt_gpus_starts_its_ranks"
    ./train_gpt $data --val-data '' -B 1 --steps 1 --gpu 1 > "$tmp/out" 2>&1
    if has "$tmp/out" "no CUDA device"; then
        check "--gpu 1 without a GPU: $(grep ^error "$tmp/out" | tr '\n' '|')" \
            test "$(grep ^error "$tmp/out")" = "error: --gpus 1: no CUDA device"
    else
        check "--gpu 1: $(grep ^error "$tmp/out" | head -1)" not has "$tmp/out" "^error"
    fi
    SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 ./train_gpt $data --val-data '' -B 1 --steps 1 --gpus 2 \
        > "$tmp/out" 2>&1
    check "--gpus 2 in a Slurm step of one task: $(grep ^error "$tmp/out" | tr '\n' '|')" not has "$tmp/out" "leave"
    check "--gpus 2 in a Slurm step of one task: more than one error line" test "$(grep -c ^error "$tmp/out")" -le 1
    end
fi

# A tokenizer file's header says how long it is, and GPT-2's vocabulary files are about a
# megabyte: a large file in their place (here 2 GB, sparse) is refused unread, not read until
# memory runs out (here a limit of 4 GB, where it would say "out of memory").
begin "tokenizer_files_are_not_read_past_their_size"
truncate -s 2G "$tmp/large.bin"
(ulimit -v 4000000; timeout 60 ./bpe encode --tokenizer "$tmp/large.bin" --input "$tmp/a.txt" --out "$tmp/zero.bin") \
    > "$tmp/out" 2>&1
check "--tokenizer a large file: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: bpe encode: .*large.bin: not a tokenizer file"
(ulimit -v 4000000; timeout 60 ./bpe encode --gpt2 "$tmp/large.bin" "$tmp/large.bin" --input "$tmp/a.txt" \
    --out "$tmp/zero.bin") > "$tmp/out" 2>&1
check "--gpt2 a large file: $(tail -1 "$tmp/out")" has "$tmp/out" "^error: bpe encode: .*large.bin: larger than 1073741824 bytes"
rm "$tmp/large.bin"
end

# Shards, checkpoints, tokenizers and HellaSwag's items are read at offsets or checked against
# their size, which a FIFO or a device cannot be: one in their place is refused in one line,
# never waited on for a writer.
begin "input_files_refuse_what_is_not_a_regular_file"
mkdir -p "$tmp/not_regular/run"
mkfifo "$tmp/not_regular/train_000000.bin" "$tmp/not_regular/model.bin" "$tmp/not_regular/run/model_00000005.bin" \
    "$tmp/not_regular/run/state_00000005.bin" "$tmp/not_regular/tokenizer.bin" "$tmp/not_regular/items.jsonl"
refused() {  # refused <what> <path> <command...>: one error line, naming path, within 10 s
    local what=$1 path=$2; shift 2
    timeout 10 "$@" > "$tmp/out" 2>&1
    check "$what: $(tail -1 "$tmp/out")" test "$(grep -c '^error' "$tmp/out")" = 1
    check "$what: $(tail -1 "$tmp/out")" grep -qx -- "error: \(.* \)\?$path: not a regular file" "$tmp/out"
}
fifo_tok=$tmp/not_regular/tokenizer.bin
refused "bpe decode --input a FIFO" "$tmp/not_regular/train_000000.bin" \
    ./bpe decode --tokenizer "$tmp/ds/tokenizer.bin" --input "$tmp/not_regular/train_000000.bin"
refused "bpe decode --input /dev/zero" /dev/zero ./bpe decode --tokenizer "$tmp/ds/tokenizer.bin" --input /dev/zero
refused "bpe encode --tokenizer a FIFO" "$fifo_tok" ./bpe encode --tokenizer "$fifo_tok" --input "$tmp/a.txt" --out "$tmp/f.bin"
refused "bpe encode --tokenizer /dev/zero" /dev/zero ./bpe encode --tokenizer /dev/zero --input "$tmp/a.txt" --out "$tmp/f.bin"
refused "bpe decode --tokenizer a FIFO" "$fifo_tok" ./bpe decode --tokenizer "$fifo_tok" --input "$tmp/ds/train_000000.bin"
refused "bpe encode --gpt2 a FIFO" "$fifo_tok" ./bpe encode --gpt2 "$fifo_tok" "$tmp/a.txt" --input "$tmp/a.txt" --out "$tmp/f.bin"
refused "prepare_data --tokenizer a FIFO" "$fifo_tok" \
    ./prepare_data --tokenizer "$fifo_tok" --split-blank-lines --out-dir "$tmp/from_fifo_tok" "$tmp/a.txt"
if [ -x ./train_gpt ]; then
    data="--model d2 --context 64 -T 64 -B 1"
    refused "--train-data a FIFO" "$tmp/not_regular/train_000000.bin" ./train_gpt $data --train-data "$tmp/not_regular/train_*.bin"
    refused "--train-data a FIFO, with --tokenizer" "$tmp/not_regular/train_000000.bin" \
        ./train_gpt $data --train-data "$tmp/not_regular/train_*.bin" --tokenizer "$tmp/ds/tokenizer.bin"
    refused "--val-data a FIFO" "$tmp/not_regular/train_000000.bin" \
        ./train_gpt $data --train-data "$tmp/ds/train_*.bin" --val-data "$tmp/not_regular/train_*.bin"
    refused "--init-from a FIFO" "$tmp/not_regular/model.bin" \
        ./train_gpt $data --train-data "$tmp/ds/train_*.bin" --init-from "$tmp/not_regular/model.bin"
    refused "--resume a folder of FIFOs" "$tmp/not_regular/run/model_00000005.bin" \
        ./train_gpt -B 1 -T 64 --train-data "$tmp/ds/train_*.bin" --resume "$tmp/not_regular/run"
    refused "--tokenizer a FIFO" "$fifo_tok" ./train_gpt $data --train-data "$tmp/ds/train_*.bin" --tokenizer "$fifo_tok"
fi
zero_model() {  # zero_model <file> <vocabulary>: a model of zeros (gpt/checkpoint.h's version 5, bf16)
    python3 -c 'import struct, sys
maxT, V, L, NH, C = 64, int(sys.argv[2]), 1, 1, 64
Vp = (V + 127) // 128 * 128
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240326, 5, maxT, V, L, NH, C, Vp, *[0] * 248))
    f.write(bytes(2 * (Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C)))' "$1" "$2"
}
# A model of zeros of ds's tokenizer: generate and evaluate take it and get as far as the file in
# question.
vocab=$(od -A n -t d4 -j 8 -N 4 "$tmp/ds/tokenizer.bin" | tr -d ' ')
zero_model "$tmp/zero.bin" "$vocab"
if [ -x ./generate ]; then
    refused "generate --checkpoint a FIFO" "$tmp/not_regular/model.bin" \
        ./generate --checkpoint "$tmp/not_regular/model.bin" --tokenizer "$tmp/ds/tokenizer.bin"
    refused "generate --tokenizer a FIFO" "$fifo_tok" ./generate --checkpoint "$tmp/zero.bin" --tokenizer "$fifo_tok"
fi
if [ -x ./evaluate ]; then
    refused "evaluate --tokenizer a FIFO" "$fifo_tok" \
        ./evaluate --checkpoint "$tmp/zero.bin" --tokenizer "$fifo_tok" --hellaswag tests/data/hellaswag_tiny.jsonl
    refused "evaluate --hellaswag a FIFO" "$tmp/not_regular/items.jsonl" \
        ./evaluate --checkpoint "$tmp/zero.bin" --tokenizer "$tmp/ds/tokenizer.bin" --hellaswag "$tmp/not_regular/items.jsonl"
fi
end

# generate and evaluate open a model's checkpoint and its tokenizer alike (gpt/model_files.h): a
# tokenizer of another vocabulary than the model's is refused in one line naming both sizes.
begin "generate_and_evaluate_refuse_a_tokenizer_of_another_vocabulary"
zero_model "$tmp/zero_larger.bin" $((vocab + 1))
for program in generate evaluate; do
    [ -x ./$program ] || continue
    ./$program --checkpoint "$tmp/zero_larger.bin" --tokenizer "$tmp/ds/tokenizer.bin" \
        $([ $program = evaluate ] && echo --hellaswag tests/data/hellaswag_tiny.jsonl) > "$tmp/out" 2>&1
    check "$program exit status 0" test $? -ne 0
    check "$program: $(tail -1 "$tmp/out")" grep -qx -- \
        "error: --tokenizer $tmp/ds/tokenizer.bin has $vocab tokens, the model $((vocab + 1))" "$tmp/out"
done
end

exit $((failures > 0))
