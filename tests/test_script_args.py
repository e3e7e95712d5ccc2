#!/usr/bin/env python3
"""tests/test_script_args.py: the command lines of the scripts, and their exit status.

- random_tokens.py: a bad count is one error line; a good one writes the shard of its format.
- gen_unicode_tables.py: --help prints the usage and writes nothing; a flag or a folder is
  refused before the tables are computed.
- compare_curves.py: a row of too few or too many fields, or a step time (ms) of 0, is one
  error line naming the log; logs of one step (no time past the first) print no NaN, and a side
  that does not reach the target is no side's yardstick; runs pair by the text in the place of
  their globs' wildcards (seed 1 with seed 1, an unmatched one left out) and the paired
  differences are the first side's minus the other's, their mean and spread.
- Without numpy (a numpy package on PYTHONPATH whose import fails): import_gpt2.py and
  export_hf.py say in one line how to get it (make venv); plot_log.py and random_tokens.py
  need none and work.
- The scripts that need torch, without it (a torch package whose import fails, so that a machine
  with torch runs no benchmark either): --help prints the usage (torch_gpt2.py, a module, what
  it is); good arguments are one line saying it needs torch. bench_torch_decode.py: a bad value,
  an option it does not know or too many positions for the context is one error line.
  bench_sdpa.py: half a shape is refused; bench_flex.py: so is a shape without its mask, or a
  mask that is not docs=N, window=N or docs=N,window=M. train_torch_reference.py: a --log that is one of the
  shards (by name, through a link, a hard link), a folder, or in a missing folder is one error
  line, and the shards and their folder are left as they were; so is an --init-from that is no
  checkpoint or no file, or that is the --log, which leaves it as it was.
- scripts/gpu_*.sh, copied with gpu_common.sh into the scripts/ of a folder that stands for the
  repository and run there against stubs of the programs they call (make, nvidia-smi, python3,
  torchrun, compute-sanitizer, ./train_gpt and the others; each records that it ran): --help
  prints the usage and runs nothing, an unknown option, an argument too many or a run from
  another folder is one error line and runs nothing (nor makes a folder there); when every stub
  succeeds the script exits 0, when every stub but make fails it exits 1 and its last line names
  the failed steps. gpu_parity.sh: an empty MODELS or SEEDS, a run or side of another name, or
  flashgpt-base without FLASHGPT_BASE is one error line and runs nothing; each side runs, and
  the reference of each seed starts from the initial weights train_gpt wrote for that seed.
Files go to $FLASHGPT_TMP; prints PASS / FAIL lines like tests/test.h.
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from array import array

from case import Case, run_script

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCRIPTS = os.path.join(ROOT, "scripts")
TMP = os.path.abspath(os.environ.get("FLASHGPT_TMP") or tempfile.mkdtemp())


def script(name):
    return os.path.join(SCRIPTS, name)


def folder(name):
    path = os.path.join(TMP, "args_" + name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def one_error_line(case, result, must_mention):
    case.check(result.returncode not in (0, None), f"exit status {result.returncode}")
    case.check(len(result.stderr.splitlines()) == 1, f"want one line on stderr, got {result.stderr!r}")
    case.check(must_mention in result.stderr, f"message {result.stderr.strip()!r} lacks {must_mention!r}")


def case_random_tokens():
    d = folder("random_tokens")
    out = os.path.join(d, "shard.bin")
    for count in ("abc", "0", "-5", "2147483648", "1.5", "²", "9" * 5000):
        case = Case(f"random_tokens: count {count[:12]} is refused")
        one_error_line(case, run_script(script("random_tokens.py"), out, count), "N_TOKENS")
        case.check(not os.listdir(d), f"wrote {os.listdir(d)}")
        case.end()
    case = Case("random_tokens: a missing count is refused")
    one_error_line(case, run_script(script("random_tokens.py"), out), "usage")
    case.end()
    case = Case("random_tokens: a shard of 1000 tokens")
    result = run_script(script("random_tokens.py"), os.path.join(d, "sub", "shard.bin"), "1000")
    if case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}"):
        data = open(os.path.join(d, "sub", "shard.bin"), "rb").read()
        case.check(len(data) == 1024 + 2000, f"{len(data)} bytes")
        header, tokens = array("i", data[:1024]), array("H", data[1024:])
        case.check(list(header[:4]) == [20240520, 1, 1000, 50257] and not any(header[4:]),
                   f"header {list(header[:4])}")
        case.check(max(tokens) < 50257, "a token past the vocabulary")
    case.end()


def case_gen_unicode_tables():
    d = folder("unicode")
    case = Case("gen_unicode_tables: --help prints the usage, writes no file")
    result = run_script(script("gen_unicode_tables.py"), "--help", cwd=d)
    case.check(result.returncode == 0 and result.stdout.startswith("usage: "), f"got {result!r}")
    case.check(not os.listdir(d), f"wrote {os.listdir(d)}")
    case.end()
    for args, must_mention in ((["-o", "x.h"], "-o"), (["a.h", "b.h"], "more than one"), ([d], "is a directory")):
        case = Case(f"gen_unicode_tables: {' '.join(args)[:20]} is refused at once")
        one_error_line(case, run_script(script("gen_unicode_tables.py"), *args, cwd=d, limit_s=10), must_mention)
        case.check(not os.listdir(d), f"wrote {os.listdir(d)}")
        case.end()


LOG_HEADER = "step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib\n"


def write_log(path, rows):
    """A log in train_gpt's columns: rows of (step, val_loss, ms)."""
    with open(path, "w") as f:
        f.write(LOG_HEADER + "".join(f"{step},5,{val},0.1,1,{ms},5,0,1\n" for step, val, ms in rows))
    return path


def case_compare_curves():
    d = folder("compare_curves")
    good = write_log(os.path.join(d, "good.csv"), [(1, 4.5, 10), (2, 4.0, 11), (3, 3.8, 12)])
    for name, text, must_mention in (("short", LOG_HEADER + "1,5,4.5,0.1,1,10,5,0,1\n2,5,4.0\n", "line 3 has 3"),
                                     ("long", LOG_HEADER + "1,5,4.5,0.1,1,10,5,0,1,7\n", "line 2 has 10"),
                                     ("zero_ms", LOG_HEADER + "1,5,4.5,0.1,1,0,5,0,1\n", "line 2: ms 0")):
        case = Case(f"compare_curves: a log with a {name.replace('_', ' ')} row is refused in one line")
        with open(os.path.join(d, name + ".csv"), "w") as f:
            f.write(text)
        one_error_line(case, run_script(script("compare_curves.py"), "a", good, "b", os.path.join(d, name + ".csv")),
                       f"{name}.csv: not a training log ({must_mention}")
        case.end()
    case = Case("compare_curves: logs of one step print no NaN")
    result = run_script(script("compare_curves.py"), "a", write_log(os.path.join(d, "one_a.csv"), [(1, 4.5, 10)]),
                        "b", write_log(os.path.join(d, "one_b.csv"), [(1, 4.4, 12)]))
    case.check(result.returncode == 0 and result.stderr == "", f"exit {result.returncode}: {result.stderr.strip()!r}")
    case.check("nan" not in result.stdout and "b: step 1 (no time" in result.stdout, f"printed {result.stdout!r}")
    case.end()
    case = Case("compare_curves: a first side that misses the target is no yardstick")
    result = run_script(script("compare_curves.py"), "a", good, "b",
                        write_log(os.path.join(d, "better.csv"), [(1, 4.4, 10), (2, 3.9, 20), (3, 3.7, 20)]),
                        "--target", "3.7")
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    case.check("a: not reached" in result.stdout and "as soon as" not in result.stdout, f"printed {result.stdout!r}")
    case.end()
    case = Case("compare_curves: runs pair by what stands for their globs' wildcards; the paired differences")
    for side, finals in (("a", {"1": 4.0, "2": 4.2, "3": 4.4}), ("b", {"1": 3.9, "2": 4.25, "4": 5.0})):
        for seed, final in finals.items():
            write_log(os.path.join(d, f"pair_{side}-s{seed}.csv"), [(1, 5.0, 10), (2, final, 10)])
    result = run_script(script("compare_curves.py"), "a", os.path.join(d, "pair_a-s*.csv"),
                        "b", os.path.join(d, "pair_b-s[0-9].csv"))
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    for line in ("| 2 | 4.2000 (0.4000) | 4.3833 (1.1000) | +0.0250 (0.1500) |",
                 "  a - b, paired: mean +0.0250, spread 0.1500 over 2 pairs of 3 runs (1: +0.1000, 2: -0.0500)"):
        case.check(line in result.stdout.splitlines(), f"no line {line!r} in {result.stdout!r}")
    result = run_script(script("compare_curves.py"), "a", os.path.join(d, "pair_a-s1.csv"),
                        "b", os.path.join(d, "pair_b-s*.csv"))
    case.check("| 2 | 4.0000 (0.0000) | 4.3833 (1.1000) | no pairs |" in result.stdout and "no runs pair" in result.stdout,
               f"one run against globbed runs: {result.stdout!r}")
    case.end()


def without(d, module):
    """The environment of a script run without module: a package of that name on PYTHONPATH,
    in folder d, whose import fails."""
    fake = os.path.join(d, "site", module)
    os.makedirs(fake)
    with open(os.path.join(fake, "__init__.py"), "w") as f:
        f.write(f'raise ImportError("No module named {module}")\n')
    return {"PYTHONPATH": os.path.dirname(fake)}


def case_without_numpy():
    d = folder("no_numpy")
    env = without(d, "numpy")
    for name, args in (("import_gpt2.py", [d, os.path.join(d, "o.bin")]),
                       ("export_hf.py", [os.path.join(d, "model.bin"), os.path.join(d, "hf")])):
        case = Case(f"{name} without numpy: one line saying how to get it")
        one_error_line(case, run_script(script(name), *args, env=env), "make venv")
        case.end()
    case = Case("plot_log.py and random_tokens.py without numpy: they need none")
    log = os.path.join(d, "log.csv")
    with open(log, "w") as f:
        f.write("step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib\n"
                "1,5,,0.1,1,1,5,0,1\n2,4,,0.1,1,1,6,0,1\n")
    for name, args in (("plot_log.py", [log, os.path.join(d, "log.svg")]),
                       ("random_tokens.py", [os.path.join(d, "shard.bin"), "10"])):
        result = run_script(script(name), *args, env=env)
        case.check(result.returncode == 0, f"{name}: exit {result.returncode}: {result.stderr.strip()!r}")
    case.end()


def case_torch_scripts():
    d = folder("no_torch")
    env = without(d, "torch")
    shards = os.path.join(d, "data")
    os.makedirs(shards)
    for name in ("train_000000.bin", "val_000000.bin"):
        with open(os.path.join(shards, name), "wb") as f:
            f.write(b"a shard")
    train = ["--train-data", os.path.join(shards, "train_*.bin")]
    for name, good in (("bench_torch_decode.py", ["--prompt", "1000", "-B", "8"]), ("bench_torch_gpt2.py", []),
                       ("bench_sdpa.py", ["64", "1024"]), ("bench_flex.py", ["64", "16384", "docs=1024"]),
                       ("train_torch_reference.py", train),
                       ("torch_gpt2.py", None)):
        case = Case(f"{name} --help without torch: the usage")
        result = run_script(script(name), "--help", env=env)
        want = "usage: " if good is not None else "scripts/torch_gpt2.py: "
        case.check(result.returncode == 0 and result.stdout.startswith(want),
                   f"exit {result.returncode}, stdout {result.stdout[:80]!r}, stderr {result.stderr.strip()!r}")
        case.end()
        if good is not None:
            case = Case(f"{name} without torch: one line saying it needs torch")
            one_error_line(case, run_script(script(name), *good, env=env), "needs torch")
            case.end()
    for name, args, must_say in (("bench_sdpa.py", ["64"], "error: one shape is HS"),
                                 ("bench_flex.py", ["64", "16384"], "error: one shape is HS"),
                                 ("bench_flex.py", ["64", "16384", "docs=0"], "error: MASK 'docs=0'"),
                                 ("bench_flex.py", ["64", "16384", "docs=8,"], "error: MASK 'docs=8,'")):
        case = Case(f"{name} {' '.join(args)}: refused")
        result = run_script(script(name), *args, env=env)
        case.check(result.returncode == 2 and must_say in result.stderr,
                   f"exit {result.returncode}, stderr {result.stderr.strip()!r}")
        case.end()
    before = {n: open(os.path.join(shards, n), "rb").read() for n in os.listdir(shards)}
    os.symlink("val_000000.bin", os.path.join(shards, "link.csv"))
    os.link(os.path.join(shards, "val_000000.bin"), os.path.join(shards, "hard.csv"))
    for log, must_mention in (("val_000000.bin", "is the input"), ("train_000000.bin", "is the input"),
                              ("link.csv", "is the input"), ("hard.csv", "is the input"),
                              (".", "is a directory"), ("nodir/log.csv", "no such folder")):
        case = Case(f"train_torch_reference.py --log {log}: refused in one line before the data")
        one_error_line(case, run_script(script("train_torch_reference.py"), *train, "--log",
                                        os.path.join(shards, log), env=env), must_mention)
        after = {n: open(os.path.join(shards, n), "rb").read() for n in os.listdir(shards) if n.endswith(".bin")}
        case.check(after == before, "a shard changed")
        case.check(sorted(os.listdir(shards)) == sorted(list(before) + ["hard.csv", "link.csv"]),
                   f"the folder holds {sorted(os.listdir(shards))}")
        case.end()
    init = os.path.join(shards, "init.bin")
    with open(init, "wb") as f:
        f.write(b"weights")
    for args, must_mention in ((["--init-from", init], f"{init}: truncated"),
                               (["--init-from", os.path.join(d, "none.bin")], "none.bin: no such file"),
                               (["--init-from", init, "--log", init], f"{init}: is the input")):
        case = Case(f"train_torch_reference.py {' '.join(os.path.basename(a) for a in args)}: refused in one line "
                    "naming the file, before torch")
        one_error_line(case, run_script(script("train_torch_reference.py"), *train, *args, env=env), must_mention)
        case.check(open(init, "rb").read() == b"weights", "the checkpoint changed")
        case.end()

    name = "bench_torch_decode.py"
    for args, must_mention in ((["--prompt", "0"], "--prompt"), (["--tokens", "-1"], "--tokens"),
                               (["-B", "0"], "-B"), (["--batch", "x"], "-B/--batch"),
                               (["--warmup", "-1"], "--warmup"), (["--vocab", "0"], "--vocab"),
                               (["--vocab", str(2 ** 24 + 1)], "--vocab"), (["--prompt", "1.5"], "--prompt"),
                               (["--prompt", str(2 ** 24 - 256)], "2^24"), (["--no-such-option"], "--no-such-option"),
                               (["d12"], "unrecognized")):
        case = Case(f"{name} {' '.join(args)}: refused in one line")
        one_error_line(case, run_script(script(name), *args, env=env), must_mention)
        case.end()


# The GPU scripts' commands: on PATH, and at the paths they run from the repository root.
PATH_STUBS = ["make", "nvidia-smi", "python3", "torchrun", "compute-sanitizer"]
LOCAL_STUBS = ["train_gpt", "prepare_data", "generate", "build/tests/test_attention",
               "build/bench/bench_attention", "build/tests/test_decode", "build/tests/test_matmul_rows",
               "tests/test_generation.sh", "tests/test_evaluate.sh"]
# Each script: the number of operands it takes, and those of a run (gpu_parity.sh's dataset,
# which gpu_run makes).
GPU_SCRIPTS = {"gpu_check.sh": (1, []), "gpu_scaling.sh": (0, []), "gpu_speed_race.sh": (0, []),
               "gpu_attention.sh": (1, []), "gpu_decode.sh": (1, []), "gpu_parity.sh": (1, ["data"])}
PARITY_VARIABLES = ("MODELS", "SIDES", "SEEDS", "FLASHGPT", "FLASHGPT_BASE", "RACE")


def gpu_run(name, args, stub_status, env_vars=None, where="."):
    """Runs scripts/NAME ARGS (with env_vars) in the folder where, under a fresh folder that
    stands for the repository (its scripts/ the script and gpu_common.sh, a dataset in data/)
    and where every command the script calls is a stub that exits with stub_status(command)
    and writes its name to ran.log. Returns (CompletedProcess, the commands that ran)."""
    d = folder("gpu_" + name)
    bin_dir, ran = os.path.join(d, "bin"), os.path.join(d, "ran.log")
    for stub in [os.path.join("bin", s) for s in PATH_STUBS] + LOCAL_STUBS:
        path = os.path.join(d, stub)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\necho {os.path.basename(stub)} "$@" >> "{ran}"\nexit {stub_status(os.path.basename(stub))}\n')
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    os.makedirs(os.path.join(d, "scripts"))
    for copied in (name, "gpu_common.sh"):
        shutil.copy(script(copied), os.path.join(d, "scripts", copied))
    os.makedirs(os.path.join(d, "data"))
    for data in ("tokenizer.bin", "train_000000.bin"):
        open(os.path.join(d, "data", data), "w").close()
    os.makedirs(os.path.join(d, where), exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TEST_TEXT", "PYTHON", "STEPS", "SHAPES", "CP_T", "OUT") + PARITY_VARIABLES}
    env.update(PATH=bin_dir + os.pathsep + env["PATH"], **(env_vars or {}))
    try:
        result = subprocess.run(["bash", os.path.relpath(os.path.join(d, "scripts", name), os.path.join(d, where)),
                                 *args], cwd=os.path.join(d, where), env=env, capture_output=True, text=True,
                                timeout=120)
    except subprocess.TimeoutExpired:
        result = subprocess.CompletedProcess(name, None, "", "timed out after 120 s")
    commands = [line.split()[0] for line in open(ran)] if os.path.exists(ran) else []
    return result, commands


def case_gpu_scripts():
    for name, (operands, run_args) in GPU_SCRIPTS.items():
        case = Case(f"{name} --help: the usage, nothing run")
        result, ran = gpu_run(name, ["--help"], lambda stub: 1)
        first = open(script(name)).read().splitlines()[1].lstrip("# ")
        case.check(result.returncode == 0 and result.stdout.startswith(first),
                   f"exit {result.returncode}, stdout {result.stdout[:80]!r}")
        case.check(not ran, f"ran {ran}")
        case.end()
        refusals = [(["--no-such-option"], "--no-such-option"),
                    (["dir"] * (operands + 1), "unexpected argument")]
        if operands:
            refusals.append((["no-such-tree"], "no-such-tree"))
        for args, must_mention in refusals:
            case = Case(f"{name} {' '.join(args)}: refused in one line, nothing run")
            result, ran = gpu_run(name, args, lambda stub: 0)
            one_error_line(case, result, must_mention)
            case.check(not ran, f"ran {ran}")
            case.end()
        case = Case(f"{name} run from another folder: refused in one line, nothing run or made")
        result, ran = gpu_run(name, [os.path.join("..", a) for a in run_args], lambda stub: 0, where="elsewhere")
        one_error_line(case, result, "run it from the repository root")
        case.check(not ran, f"ran {ran}")
        elsewhere = os.path.join(TMP, "args_gpu_" + name, "elsewhere")
        case.check(not os.listdir(elsewhere), f"made {os.listdir(elsewhere)}")
        case.end()
        case = Case(f"{name}: every step succeeds, exit status 0")
        result, ran = gpu_run(name, run_args, lambda stub: 0, {"OUT": "logs"})
        case.check(result.returncode == 0 and "failed steps" not in result.stdout,
                   f"exit {result.returncode}, last line {result.stdout.splitlines()[-1:]}")
        case.end()
        case = Case(f"{name}: every step after the build fails, exit status 1 naming them")
        result, ran = gpu_run(name, run_args, lambda stub: 0 if stub == "make" else 1, {"OUT": "logs"})
        last = (result.stdout.splitlines() or [""])[-1]
        case.check(result.returncode == 1, f"exit status {result.returncode}")
        case.check(last.startswith("failed steps: "), f"last line {last!r}")
        case.end()


def case_gpu_parity_variables():
    for env_vars, must_mention in (({"MODELS": ""}, "MODELS is empty"), ({"SEEDS": " "}, "SEEDS is empty"),
                                   ({"MODELS": "d6 d7"}, "no parity run called d7"),
                                   ({"SIDES": "flashgpt refrence"}, "no side called refrence"),
                                   ({"SIDES": "flashgpt-base"}, "FLASHGPT_BASE")):
        what = " ".join(f"{k}='{v}'" for k, v in env_vars.items())
        case = Case(f"gpu_parity.sh with {what}: refused in one line, nothing run")
        result, ran = gpu_run("gpu_parity.sh", ["data"], lambda stub: 0, dict(env_vars, OUT="logs"))
        one_error_line(case, result, must_mention)
        case.check(not ran, f"ran {ran}")
        case.end()
    case = Case("gpu_parity.sh with MODELS=d6-t256 and SIDES of each kind: runs each, the reference from "
                "train_gpt's initial weights of the seed")
    result, ran = gpu_run("gpu_parity.sh", ["data"], lambda stub: 0,
                          {"MODELS": "d6-t256", "SIDES": "flashgpt flashgpt-base reference+residual",
                           "FLASHGPT_BASE": "./train_gpt", "SEEDS": "1 2", "OUT": "logs"})
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    # Each seed: the initial weights, flashgpt, flashgpt-base, the reference; then the curves.
    case.check(ran.count("train_gpt") == 6 and ran.count("python3") == 3, f"ran {ran}")
    lines = open(os.path.join(TMP, "args_gpu_gpu_parity.sh", "ran.log")).read().splitlines()
    for seed in (1, 2):
        init = f"logs/parity/d6-t256/init-s{seed}.bin"
        saves = [line for line in lines if line.startswith("train_gpt ") and f"--save-init {init}" in line]
        case.check(len(saves) == 1 and f"--seed {seed} " in saves[0], f"seed {seed}: train_gpt --save-init {saves}")
        starts = [line for line in lines if "train_torch_reference.py" in line and f"--init-from {init}" in line]
        case.check(len(starts) == 1 and f"--seed {seed} " in starts[0], f"seed {seed}: the reference {starts}")
    case.end()


def main():
    case_random_tokens()
    case_gen_unicode_tables()
    case_compare_curves()
    case_without_numpy()
    case_torch_scripts()
    case_gpu_scripts()
    case_gpu_parity_variables()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
