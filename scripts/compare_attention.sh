#!/usr/bin/env bash
# Naive against flash attention in train_gpt as the context grows. For d12 (GPT-2 124M) and
# T = 1024, 2048, 4096, ... each mode trains a few steps with the same tokens per step
# (B = TOKENS / T, then B = 1 once T reaches TOKENS) on synthetic shards of GPT-2's vocabulary
# (random tokens: the speed does not depend on the text), until it runs out of memory (train_gpt's
# own fit check or a CUDA out-of-memory error: the end of that mode's series, not a failure)
# or T passes --max-t. The model's context is T (learned positions sized to it).
# Per run: tokens/s (the mean over the steps after the first), MFU at that speed, and the most
# device memory in use (GiB = 2^30 bytes). Writes PREFIX.csv and PREFIX.svg (tokens/s and
# memory against log2 T, one line per mode, drawn here with awk) and prints a Markdown table.
#
# usage: scripts/compare_attention.sh [--tokens N] [--steps N] [--max-t N] [--modes "flash naive"]
#                                     [--out PREFIX] [-- more train_gpt options]
#   --tokens N   tokens per step [65536]      --steps N   steps per run, the first untimed [3]
#   --max-t N    the largest T tried [1048576] --out P    output prefix [build/compare_attention]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tokens=65536; steps=3; max_t=1048576; modes="flash naive"; prefix=build/compare_attention
while [ $# -gt 0 ]; do
    case "$1" in
        --tokens) tokens=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --max-t) max_t=$2; shift 2 ;;
        --modes) modes=$2; shift 2 ;;
        --out) prefix=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "error: compare_attention.sh: unknown option $1 (see the comment at its top)" >&2; exit 1 ;;
    esac
done
for n in "$tokens" "$steps" "$max_t"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "error: compare_attention.sh: '$n' is not a positive integer" >&2; exit 1; }
done
[ "$steps" -ge 2 ] || { echo "error: compare_attention.sh: --steps must be at least 2 (the first is not timed)" >&2; exit 1; }
train_gpt="$root/train_gpt"
[ -x "$train_gpt" ] || make -C "$root" train_gpt >&2
mkdir -p "$(dirname "$prefix")"
work="$prefix.runs"
mkdir -p "$work"

# One shard of random tokens, enough for two batches at the largest T.
shard="$work/synth_000000.bin"
need=$(( (max_t > tokens ? max_t : tokens) * 2 + 1 ))
python3 "$root/scripts/random_tokens.py" "$shard" "$need"

csv="$prefix.csv"
echo "mode,T,B,tokens_per_s,mfu_percent,peak_mem_gib,status" > "$csv"
for mode in $modes; do
    T=1024
    while [ "$T" -le "$max_t" ]; do
        B=$(( tokens / T )); [ "$B" -ge 1 ] || B=1
        log="$work/$mode-T$T.log"
        start=$(date +%s)
        status=ok
        "$train_gpt" --model d12 --context "$T" -B "$B" -T "$T" --steps "$steps" \
            --train-data "$work/synth_*.bin" --val-data '' --attention "$mode" "$@" > "$log" 2>&1 || status=failed
        if grep -q "does not fit in GPU memory" "$log"; then status=oom-fit-check
        elif grep -qi "out of memory" "$log"; then status=oom-cuda
        fi
        echo "$mode T $T B $B: $status ($(( $(date +%s) - start )) s)" >&2
        if [ "$status" = ok ]; then
            # "done: 523.7K tokens/s ... peak memory in use 27.30 GiB" and "MFU: 0.855 GFLOP per token, peak 989 TFLOP/s"
            awk -v mode="$mode" -v T="$T" -v B="$B" '
                /^MFU: / { gflop = $2; peak = $7 }
                /^done: / { sub(/K$/, "", $2); tps = $2 * 1000; mem = $(NF - 1) }
                END { mfu = peak > 0 ? 100 * gflop * 1e9 * tps / (peak * 1e12) : 0
                      printf "%s,%d,%d,%.0f,%.1f,%.2f,ok\n", mode, T, B, tps, mfu, mem }' "$log" >> "$csv"
        else
            echo "$mode,$T,$B,,,,$status" >> "$csv"
            [ "$status" = failed ] && tail -n 3 "$log" >&2
            break
        fi
        T=$(( T * 2 ))
    done
done

# The chart: two panels (tokens/s, memory) against log2 T, a polyline and dots per mode, and
# where each mode ran out of memory.
awk -F, -v modes="$modes" '
function x_of(t) { return px + 50 + (log(t) / log(2) - lo) / (hi - lo > 0 ? hi - lo : 1) * (W - 80) }
function y_of(v, top) { return 40 + (H - 90) * (1 - v / top) }
function nice(v,   p, k, s) { p = 1; while (p * 10 < v) p *= 10; split("1.2 1.5 2 2.5 3 4 5 6 8 10", s, " ")
                            for (k = 1; s[k] * p < v; k++); return s[k] * p }
function label(t) { t += 0; return t >= 1048576 ? t / 1048576 "M" : t / 1024 "K" }
NR > 1 { t = $2; lt = log(t) / log(2); if (lo == "" || lt < lo) lo = lt; if (lt > hi) hi = lt
         Ts[t] = 1; if ($7 ~ /^oom/) oom[$1] = t; if ($7 == "ok") { tps[$1, t] = $4 / 1000; mem[$1, t] = $6
         if ($4 / 1000 > max_tps) max_tps = $4 / 1000; if ($6 > max_mem) max_mem = $6 } }
END {
    W = 480; H = 340; n = split(modes, m, " "); color["flash"] = "#1f77b4"; color["naive"] = "#d62728"
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", 2 * W, H
    printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
    for (panel = 0; panel < 2; panel++) {
        px = panel * W; top = nice(panel ? max_mem : max_tps); if (top <= 0) top = 1
        printf "<text x=\"%d\" y=\"22\" font-size=\"14\">%s</text>\n", px + 50,
               panel ? "peak GPU memory in use (GiB)" : "training speed (thousand tokens/s)"
        for (k = 0; k <= 5; k++) {
            y = y_of(top * k / 5, top)
            printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", px + 50, y, px + W - 30, y
            printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", px + 45, y + 4, top * k / 5
        }
        for (t in Ts) {
            x = x_of(t)
            printf "<line x1=\"%.1f\" y1=\"40\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n", x, x, H - 50
            printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, H - 34, label(t)
        }
        printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">sequence length T (log scale; B = tokens per step / T, at least 1)</text>\n", px + W / 2 + 10, H - 14
        for (i = 1; i <= n; i++) {
            pts = ""
            for (k = int(lo); k <= hi; k++) {
                t = 2 ^ k
                if ((m[i], t) in tps) {
                    v = panel ? mem[m[i], t] : tps[m[i], t]
                    pts = pts sprintf("%.1f,%.1f ", x_of(t), y_of(v, top))
                    printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x_of(t), y_of(v, top), color[m[i]]
                }
            }
            printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts, color[m[i]]
            if (m[i] in oom)
                printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\" fill=\"%s\">%s: out of memory</text>\n",
                       x_of(oom[m[i]]), H - 56 - 16 * (i - 1), (x_of(oom[m[i]]) > px + W - 120 ? "end" : "middle"),
                       color[m[i]], m[i]
            printf "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", px + W - 90, 40 + 16 * i, color[m[i]], m[i]
        }
    }
    printf "</svg>\n"
}' "$csv" > "$prefix.svg"

# The Markdown table: a row per T, the modes side by side.
awk -F, -v modes="$modes" '
NR > 1 { if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 }; B[$2] = $3
         if ($7 == "ok") cell[$1, $2] = sprintf("%.1fK | %.1f%% | %.1f", $4 / 1000, $5, $6)
         else cell[$1, $2] = ($7 ~ /^oom/ ? "out of memory" : $7) " | | " }
END {
    k = split(modes, m, " ")
    head = "| T | B"; rule = "|---|---"
    for (i = 1; i <= k; i++) { head = head " | " m[i] " tokens/s | MFU | GiB"; rule = rule "|---|---|---" }
    print head " |"; print rule "|"
    for (j = 1; j <= n; j++) {
        row = "| " order[j] " | " B[order[j]]
        for (i = 1; i <= k; i++) row = row " | " ((m[i], order[j]) in cell ? cell[m[i], order[j]] : "- | | ")
        print row " |"
    }
}' "$csv"
echo "wrote $csv and $prefix.svg" >&2
