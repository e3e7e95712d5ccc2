#!/usr/bin/env bash
# Runs every benchmark program given as an argument, one after the other.
set -u
for b in "$@"; do
    echo "== $b"
    "$b" || echo "benchmark $b failed with status $?"
done
