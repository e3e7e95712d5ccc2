#!/usr/bin/env bash
# tests/programs/test_fuzz_inputs.sh: make test's run of tests/programs/fuzz_inputs.py, every program against 30
# mutated copies of each file it reads. The driver needs python3 alone; the scripts that need
# numpy run with $PYTHON and say SKIPPED without it.
set -u
cd "$(dirname "$0")/../.."
exec python3 tests/programs/fuzz_inputs.py --cases 30
