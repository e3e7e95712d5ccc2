#!/usr/bin/env bash
# Prints the path of the tinyshakespeare text on stdout: $TEXT when set (it must exist), else
# datasets/tinyshakespeare/input.txt, downloaded on first use with curl or wget.
set -euo pipefail
URL=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt

if [ -n "${TEXT:-}" ]; then
    if [ ! -f "$TEXT" ]; then
        echo "error: TEXT=$TEXT: no such file" >&2
        exit 1
    fi
    echo "$TEXT"
    exit 0
fi

root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/datasets/tinyshakespeare
out=$dir/input.txt
if [ -s "$out" ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$dir"
# Download to a temporary name so an interrupted download is never taken for the text.
tmp=$out.part.$$
trap 'rm -f "$tmp"' EXIT
echo "downloading $URL" >&2
if command -v curl >/dev/null 2>&1; then
    fetch=(curl -fsSL --connect-timeout 10 -o "$tmp" "$URL")
elif command -v wget >/dev/null 2>&1; then
    fetch=(wget -q --tries=2 --timeout=10 -O "$tmp" "$URL")
else
    echo "error: neither curl nor wget is installed; download $URL" \
         "yourself and set TEXT=path/to/input.txt" >&2
    exit 1
fi
if ! "${fetch[@]}" || [ ! -s "$tmp" ]; then
    echo "error: could not download $URL (offline?);" \
         "set TEXT=path/to/input.txt to use a local copy" >&2
    exit 1
fi
mv "$tmp" "$out"
echo "$out"
