#!/usr/bin/env bash
# Tokenizes a text into datasets/NAME/: tokenizer.bin (a 4096-id BPE trained on the training
# part), train_*.bin and val_*.bin (one document per paragraph, 10% held out). The text is
# tinyshakespeare, which the project carries (texts/, unpacked into build/texts/), or TEXT=path;
# NAME is the text file's name without its extension (the whole name where that leaves nothing,
# "." or ".."), so another text never replaces the data of tinyshakespeare, nor datasets/ itself.
# Prints that directory on stdout; everything else goes to stderr. Does nothing when the outputs
# were made from the same text (path, size and modification time) with the same options, as the
# stamp file prepared_from records.
set -euo pipefail
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
out=$root/datasets/$stem
options=(--vocab-size 4096 --split-blank-lines)
stamp_file=$out/prepared_from
stamp=$(printf 'text %s\nsize and time %s\noptions %s' "$(realpath "$text")" \
        "$(stat -c '%s %y' "$text")" "${options[*]}")

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
rm -f "$stamp_file"   # a failed run leaves no stamp, so the next one starts over
"$root/prepare_data" "${options[@]}" --out-dir "$out" "$text" >&2
echo "$stamp" > "$stamp_file"
echo "$out"
