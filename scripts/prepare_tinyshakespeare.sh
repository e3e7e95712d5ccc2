#!/usr/bin/env bash
# Tokenizes a text into datasets/NAME/: tokenizer.bin (a 4096-id BPE trained on the training
# part), train_*.bin and val_*.bin (one document per paragraph, 10% held out). The text is
# tinyshakespeare, which the project carries (texts/, unpacked into build/texts/), or TEXT=path.
# NAME is the text file's name without its extension (the whole name where that leaves nothing,
# "." or ".."), never datasets/ itself; when datasets/NAME holds a dataset not made from this very
# text (one prepare_data made, or another text's of the same name, tinyshakespeare's among them),
# the data goes to the first of datasets/NAME-2, NAME-3, ... that is missing, empty or this text's,
# and a line says so: a dataset is never replaced by another's. The stamp file prepared_from
# records what a folder was made from: the text's path on its first line (whose folder it is),
# then its size and modification time and the options. Prints the directory on stdout;
# everything else goes to stderr. Does nothing when the stamp matches the text as it is now.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
if [ $# -gt 0 ]; then
    echo "error: $(basename "$0") takes no arguments: TEXT=path names the text (--help prints the usage)" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
text=${TEXT:-$root/build/texts/tinyshakespeare.txt}
if [ -z "${TEXT:-}" ] && [ ! -f "$text" ]; then
    make -C "$root" build/texts/tinyshakespeare.txt >&2
fi
if [ -d "$text" ]; then
    why="is a directory"
elif [ ! -e "$text" ]; then
    why="no such file"
elif [ ! -f "$text" ]; then
    why="not a regular file"
elif [ ! -r "$text" ]; then
    why="cannot be read"
fi
if [ -n "${why:-}" ]; then
    echo "error: TEXT=$text: $why" >&2
    exit 1
fi
name=$(basename "$text")
stem=${name%.*}
case $stem in ""|.|..) stem=$name ;; esac
source_line="text $(realpath "$text")"

# The data's folder: the first of base, base-2, base-3, ... that is missing, empty, or whose stamp
# names this text.
data_folder() {
    local base=$1 dir=$1 n=1
    while [ -e "$dir" ] && { [ ! -d "$dir" ] || [ -n "$(ls -A "$dir")" ]; } &&
          [ "$(head -n 1 "$dir/prepared_from" 2>/dev/null)" != "$source_line" ]; do
        n=$((n + 1))
        dir=$base-$n
    done
    echo "$dir"
}
out=$(data_folder "$root/datasets/$stem")
if [ "$out" != "$root/datasets/$stem" ]; then
    echo "datasets/$stem holds data not made from $text (by prepare_data, or from another text of that" \
         "name): this text's goes to datasets/$(basename "$out")" >&2
fi
options=(--vocab-size 4096 --split-blank-lines)
stamp_file=$out/prepared_from
stamp=$(printf '%s\nsize and time %s\noptions %s' "$source_line" "$(stat -c '%s %y' "$text")" "${options[*]}")

up_to_date=1
for f in tokenizer.bin train_000000.bin val_000000.bin; do
    if [ ! -f "$out/$f" ]; then up_to_date=0; fi
done
if [ "$up_to_date" = 1 ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then
    echo "$out is up to date with $text" >&2
    echo "$out"
    exit 0
fi

if [ ! -x "$root/prepare_data" ]; then
    make -C "$root" prepare_data >&2
fi
# Until prepare_data is done the stamp names the text alone: a failed run leaves the folder this
# text's, and out of date, so the next one starts over.
if [ -d "$out" ]; then echo "$source_line" > "$stamp_file"; fi
"$root/prepare_data" "${options[@]}" --out-dir "$out" "$text" >&2
echo "$stamp" > "$stamp_file"
echo "$out"
