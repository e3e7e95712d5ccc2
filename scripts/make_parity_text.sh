#!/usr/bin/env bash
# scripts/make_parity_text.sh: a text of millions of tokens for the training-parity benchmark
# (scripts/gpu/parity.sh), made from what a Debian machine has, and its dataset:
#   bash scripts/make_parity_text.sh docs OUT_DIR      English prose: the reStructuredText sources
#                                                      of the Linux kernel's and Python's manuals
#                                                      (Debian's linux-doc-6.1, python3.11-doc,
#                                                      fetched with apt-get download), 29 MB
#   bash scripts/make_parity_text.sh python OUT_DIR    code: the .py files of this python3's
#                                                      standard library (not site-packages)
# Each source file is one document; the documents are put in a fixed pseudo-random order, so the
# validation documents (prepare_data's last 10%) are a sample of the whole. OUT_DIR gets
# prepare_data's dataset with an 8192-id BPE (docs: 8.07M training tokens; python 3.11.7: 7.68M),
# which replaces OUT_DIR: not the current folder nor one above it.
set -euo pipefail
usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; }
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    docs|python) ;;
    *) usage >&2; echo "error: the first argument is docs or python" >&2; exit 2 ;;
esac
[ $# -eq 2 ] || { usage >&2; echo "error: two arguments: docs|python OUT_DIR" >&2; exit 2; }
[ -n "$2" ] || { echo "error: OUT_DIR is empty: name the dataset's folder" >&2; exit 2; }
kind=$1 out=$(realpath -m "$2")
root=$(cd "$(dirname "$0")/.." && pwd)
# prepare_data refuses such an OUT_DIR too, as it runs here, but only after the text is made.
case "$(pwd -P)/" in
    "${out%/}/"*) echo "error: OUT_DIR $2 is the current folder or above it, which the dataset would replace" >&2; exit 2 ;;
esac
[ -x "$root/prepare_data" ] || make -C "$root" prepare_data >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/docs"
if [ "$kind" = docs ]; then
    (cd "$work" && apt-get download linux-doc-6.1 python3.11-doc > /dev/null)
    for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
    n=0
    # The kernel's translations are left out: the text is English.
    while IFS= read -r f; do zcat "$f" > "$work/docs/k$n.txt"; n=$((n + 1)); done < <(
        find "$work/root/usr/share/doc/linux-doc-6.1/Documentation" -name '*.rst.gz' -not -path '*/translations/*' | sort)
    while IFS= read -r f; do cp "$f" "$work/docs/p$n.txt"; n=$((n + 1)); done < <(
        find "$work/root" -path '*python3.11*_sources*' -name '*.txt' | sort)
else
    lib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
    n=0
    while IFS= read -r f; do cp "$f" "$work/docs/$n.py"; n=$((n + 1)); done < <(
        find "$lib" -name '*.py' -not -path '*/site-packages/*' -size +0 | sort)
fi
ls "$work/docs" | sort | shuf --random-source=<(yes 7) | sed "s|^|$work/docs/|" > "$work/order.txt"
mapfile -t docs < "$work/order.txt"
"$root/prepare_data" --out-dir "$out" --vocab-size 8192 "${docs[@]}"
