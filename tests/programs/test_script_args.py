#!/usr/bin/env python3
"""tests/programs/test_script_args.py: the command lines of the scripts, and their exit status.

- random_tokens.py: a bad count is one error line; a good one writes the shard of its format.
- gen_unicode_tables.py: --help prints the usage and writes nothing; a flag or a folder is
  refused before the tables are computed.
- compare_curves.py: a row of too few or too many fields, or a step time (ms) of 0, is one
  error line naming the log; logs of one step (no time past the first) print no NaN, and a side
  that does not reach the target is no side's yardstick; runs pair by the text in the place of
  their globs' wildcards (seed 1 with seed 1, an unmatched one left out) and the paired
  differences are the first side's minus the other's, their mean and spread; --train-loss sets
  the mean training loss since the validation before beside each validation loss and tells a
  curve that rises after its lowest point while the training loss falls (over-fitting) from one
  whose training loss rises too (divergence). A --target of nan, inf, -1 or 0, a side's name
  given twice, and with --runs two logs of one name, are one error line naming the flag or the
  name, before any log is read. --runs: the target the best baseline run's final loss, each
  run's step reaching it and its shares of that run's steps and training time.
- Without numpy (a numpy package on PYTHONPATH whose import fails): import_gpt2.py and
  export_hf.py say in one line how to get it (make venv); plot_log.py and random_tokens.py
  need none and work.
- Every script's --help (the Python ones with a __main__, the shell ones but gpu_common.sh, which
  the others source), run from a copy of scripts/ without numpy, torch or transformers: the
  usage, exit 0, nothing on stderr, nothing made. A script given good arguments without a package
  it needs says so in one line, with how to get it: check_export_hf.py without numpy, torch or
  transformers, train_torch_reference.py without numpy. train_torch_reference.py: a count out of
  its range (-B 0) is argparse's error naming that option alone.
- The scripts that need torch, without it (a torch package whose import fails, so that a machine
  with torch runs no benchmark either): --help prints the usage (torch_gpt2.py, a module, what
  it is); good arguments are one line saying it needs torch. bench_torch_decode.py: a bad value,
  an option it does not know or too many positions for the context is one error line.
  bench_torch_attention.py: half a shape is refused, so is --masked with one shape, or a mask that
  is not docs=N, window=N or docs=N,window=M. train_torch_reference.py: a --log that is one of the
  shards (by name, through a link, a hard link), a folder, or in a missing folder is one error
  line, and the shards and their folder are left as they were; so is an --init-from that is no
  checkpoint or no file, or that is the --log, which leaves it as it was, and a --tokenizer that
  is no tokenizer file or no file; --align-documents without --tokenizer is argparse's error.
- The architecture: train_gpt --save-init's checkpoints of the modern architecture and of an
  ablation (version 6) are what scripts/gpt2_checkpoint.py reads (the architecture, the tensors
  it has in their order, the zero-initialised ones zero); train_torch_reference.py settles its
  architecture from such a checkpoint, or from --arch and the components, then says it needs
  torch; options that ask for another architecture than the checkpoint's, a corrupt
  architecture in its header (a switch of 2, a base of 0.5, a slot past it not 0) or a version
  that does not fit its size are one line naming the file; an invalid architecture
  (train_torch_reference.py and bench_torch_gpt2.py), a Muon setting under AdamW, --head-lr of a
  tied head or a bad setting (out of train_gpt's bounds, a weight decay that erases the weights
  at the peak), Muon's variants under AdamW, out of bounds or without effect (NorMuon's beta
  without --normuon, cautious decay without a decay) are argparse's error, all before torch; so
  are an option without effect (a rotary base without rotary) and a soft cap below 1. A setting
  not given takes the defaults of --arch's preset, else of the preset nearest the architecture
  (of the options, or of the checkpoint); Muon's variants are off unless given, NorMuon's beta
  0.95 with it, as train_gpt's. --window-pattern (train_torch_reference.py, bench_torch_gpt2.py):
  a window that is no number or full, a pattern of none but full, of more than 64 windows, of a
  window no narrower than the context or longer than the layers is argparse's error; a checkpoint
  of windows is settled (with the same pattern given too), one of other windows refused naming it,
  one of documents refused.
- scripts/gpu/*.sh, copied with gpu/common.sh into the scripts/ of a folder that stands for the
  repository and run there against stubs of the programs they call (make, nvidia-smi, python3,
  torchrun, compute-sanitizer, ./train_gpt and the others; each records that it ran): --help
  prints the usage and runs nothing, an unknown option, an argument too many or a run from
  another folder is one error line and runs nothing (nor makes a folder there); when every stub
  succeeds the script exits 0, when every stub but make fails it exits 1 and its last line names
  the failed steps. gpu/parity.sh: an empty MODELS or SEEDS, a run or side of another name,
  flashgpt-base without FLASHGPT_BASE or an ARCH of another name is one error line and runs
  nothing, as is ARCH=2026 with OPTIMIZER=adamw, MUON_LR or MODERN_LR; each side runs, and the
  reference of each seed starts from the initial weights train_gpt wrote for that seed; with ARCH
  and OPTIMIZER both sides train the modern or GPT-2 architecture at that recipe's rates (nothing
  of --arch for GPT-2's, so an older FLASHGPT_BASE runs too), ARCH=2026 the 2026 preset at its
  own optimizer, rates, weight decay and schedule (no option of them), at the runs' warmup, clip
  and validation; WEIGHT_DECAY replaces the weight decay, each in a folder of its own, and the
  curves come with the training loss. gpu/modern.sh: an empty PARTS, a part of another name, or the
  learning part without a dataset is one error line and runs nothing; the speed part runs the
  three recipes in train_gpt and modern-muon in bench_torch_gpt2.py at both shapes; the
  learning part the three recipes, then the reference under torch.compile from the initial
  weights train_gpt wrote; the profile part the three recipes profiled. gpu/decode.sh trains a modern d12 beside GPT-2's and generates with
  both at every prompt and sample count. gpu/masks.sh without a dataset is one error line and
  runs nothing; it trains the modern recipe with documents and WINDOWS at T 8192 and dense at
  T 1024, the same steps of the same tokens, then tabulates them against the dense run.
  gpu/recipe.sh: a MODE of another name, a PARTS_FILTER that picks no row of the mode's table (or
  any under MODE=race), a RACE_SET, RACE_BATCHES, RACE_STEPS or RACE_WARMUP out of place or no
  dataset is one error line and runs nothing; MODE=alone trains the base, then the base with each
  part picked (and the part it needs) at seed 1, its logs in one file under OUT; MODE=out the
  base, NEW_PRESET (by default NEW_PRESET_PARTS' options: the measured gains and nanochat's three
  parts), then NEW_PRESET without each part (and the parts that need it), leaving out a part the
  set does not hold; MODE=sets the base, then each set picked with the full set for {preset}, and
  its table says which sets meet the bars; MODE=race runs train_gpt and the reference under
  torch.compile at B 16 and 64 with each set's options (by default the candidate's, then the
  candidate's at full attention), and the reference takes every set's.
  gpu/fp8.sh (a dataset and a baseline tree its operands): an empty PARTS, a part of another name,
  the learning part without a dataset, the nowait part without a baseline or with one that is no
  tree, a MODELS of another model or empty, a FILL_BATCHES or STEPS that is no positive number, a
  batch past 256 (more than the random tokens hold), or an $OUT/fp8 that holds files is one error
  line and runs nothing (those files left as they were). Against a train_gpt stub that prints the lines train_gpt prints, writes its --log and
  refuses a batch too large for memory: the speed part runs d12 at B 16 and 64 in bf16 and the
  five FP8 settings, and d48 at the largest batch the memory check takes for --fp8 mlp,head
  (with --recompute when none fits without), its table the ratios to bf16, the bars and the MFU
  from the MFU line's GFLOP per token; the logs end packed in one file beside the tables. The
  learning part runs both recipes in bf16 and both FP8 scalings at seed 1, its table FP8 minus
  bf16 against 0.02 nats; the nowait part builds the baseline and runs N1 and N2 steps of both
  recipes at B 16 and 64 on this tree, the baseline and this tree again. The test part prints
  test_gpt's FP8 and late-report lines alone, fails memcheck's errors and reports its time-out.
Files go to $FLASHGPT_TMP; prints PASS / FAIL lines like tests/lib/test.h.
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from array import array

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from case import Case, run_script  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
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

    for args, must_mention in ((["--target", "nan"], "--target nan"), (["--target", "inf"], "--target inf"),
                               (["--target", "-1"], "--target -1"), (["--target", "0"], "--target 0"),
                               (["--runs", "--target", "nan"], "--target nan")):
        case = Case(f"compare_curves {' '.join(args)}: refused in one line naming the flag")
        logs = [good] if "--runs" in args else ["a", good, "b", good]
        one_error_line(case, run_script(script("compare_curves.py"), *args, *logs), must_mention)
        case.end()
    case = Case("compare_curves: a side's name given twice is refused in one line naming it")
    one_error_line(case, run_script(script("compare_curves.py"), "a", good, "b", good, "a", good), "side a is given twice")
    case.end()
    case = Case("compare_curves --runs: two logs of one name are refused in one line naming it")
    os.makedirs(os.path.join(d, "other"))
    shutil.copy(good, os.path.join(d, "other", "good.csv"))
    one_error_line(case, run_script(script("compare_curves.py"), "--runs", good, os.path.join(d, "other", "good.csv")),
                   "two runs are named good")
    case.end()
    case = Case("compare_curves --runs: each run against the best baseline run's final loss, shares of its steps and "
                "time")
    runs = [write_log(os.path.join(d, "adamw-a.csv"), [(1, 4.5, 100), (2, 4.0, 100), (3, 3.8, 100), (4, 3.7, 100)]),
            write_log(os.path.join(d, "adamw-b.csv"), [(1, 4.6, 100), (2, 4.1, 100), (3, 3.9, 100), (4, 3.8, 100)]),
            write_log(os.path.join(d, "muon-a.csv"), [(1, 4.1, 200), (2, 3.7, 200), (3, 3.5, 200), (4, 3.4, 200)])]
    result = run_script(script("compare_curves.py"), "--runs", *runs)
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    for line in ("target: validation loss 3.7000 (the best adamw run's final, adamw-a)",
                 "| adamw-a | 3.7000 | 4 of 4 | 0.4 of 0.4 | 100%, 100% | 0.0K |",
                 "| adamw-b | 3.8000 | not reached |  |  | 0.0K |",
                 "| muon-a | 3.4000 | 2 of 4 | 0.4 of 0.8 | 50%, 100% | 0.0K |"):
        case.check(line in result.stdout.splitlines(), f"no line {line!r} in {result.stdout!r}")
    case.end()

    case = Case("compare_curves --train-loss: the training loss beside the validation loss, and what the curves do "
                "after their lowest validation loss")
    # step t's (training loss, validation loss); validation every 2 steps
    shapes = {"over": lambda t: (6 - 0.5 * t, 5 - 0.5 * min(t, 4) + 0.25 * max(0, t - 4)),
              "diverged": lambda t: (6 - 0.5 * min(t, 4) + 0.5 * max(0, t - 4), 5 - 0.5 * min(t, 4) + 0.5 * max(0, t - 4)),
              "falling": lambda t: (6 - 0.5 * t, 5 - 0.25 * t)}
    args = []
    for name, shape in shapes.items():
        path = os.path.join(d, f"train_{name}.csv")
        with open(path, "w") as f:
            f.write(LOG_HEADER + "".join(f"{t},{shape(t)[0]},{shape(t)[1] if t % 2 == 0 else ''},0.1,1,10,5,0,1\n"
                                         for t in range(1, 9)))
        args += [name, path]
    result = run_script(script("compare_curves.py"), *args, "--train-loss")
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    for line in ("| 4 | 4.2500 | 3.0000 | 4.2500 | 3.0000 | 4.2500 | 4.0000 |",  # steps 3 and 4: 4.5 and 4.0
                 "  over: lowest validation 3.0000 at step 4, last 4.0000; over-fitting: the validation loss rises "
                 "+1.0000 after step 4 while the training loss falls from 4.2500 to 2.2500",
                 "  diverged: lowest validation 3.0000 at step 4, last 5.0000; divergence: the validation loss rises "
                 "+2.0000 after step 4 and the training loss with it, from 4.2500 to 5.7500",
                 "  falling: lowest validation 3.0000 at step 8, last 3.0000; the validation loss is lowest at the last "
                 "step"):
        case.check(line in result.stdout.splitlines(), f"no line {line!r} in {result.stdout!r}")
    case.end()


def without(d, *modules, stand_ins=()):
    """The environment of a script run without modules: packages of those names on PYTHONPATH,
    in folder d, whose import fails; stand_ins: modules (dotted names too) that import, empty."""
    site = os.path.join(d, "site")
    for module in modules:
        os.makedirs(os.path.join(site, module))
        with open(os.path.join(site, module, "__init__.py"), "w") as f:
            f.write(f'raise ImportError("No module named {module}")\n')
    for module in stand_ins:
        package = os.path.join(site, *module.split("."))
        os.makedirs(package, exist_ok=True)
        open(os.path.join(package, "__init__.py"), "a").close()
    return {"PYTHONPATH": site}


# Programs among the scripts, each run with --help: the Python scripts with a __main__, the shell
# scripts (scripts/gpu/'s too) but the one the GPU scripts source.
SOURCED = (os.path.join("gpu", "common.sh"),)


def case_help_without_packages():
    """Every script's --help, run from a copy of scripts/ in a folder that stands for the
    repository (no programs, no texts there) without numpy, torch or transformers: the usage on
    stdout, exit 0, nothing on stderr, nothing made."""
    d = folder("help")
    env = without(d, "numpy", "torch", "transformers")
    shutil.copytree(SCRIPTS, os.path.join(d, "root", "scripts"), ignore=shutil.ignore_patterns("__pycache__"))
    names = sorted(n for n in os.listdir(SCRIPTS) if n.endswith(".sh") or
                   n.endswith(".py") and "__main__" in open(script(n)).read())
    names += sorted(os.path.join("gpu", n) for n in os.listdir(os.path.join(SCRIPTS, "gpu")) if n.endswith(".sh"))
    names = [n for n in names if n not in SOURCED]
    case = Case(f"--help of every script ({len(names)}) without numpy, torch or transformers")
    for name in names:
        path = os.path.join(d, "root", "scripts", name)
        if name.endswith(".py"):
            result = run_script(path, "--help", limit_s=60, env=env)
        else:
            result = subprocess.run(["bash", path, "--help"], capture_output=True, text=True, timeout=60,
                                    env=dict(os.environ, **env), cwd=d)
        case.check(result.returncode == 0 and result.stdout.strip() and not result.stderr.strip(),
                   f"{name} --help: exit {result.returncode}, stdout {result.stdout[:60]!r}, stderr "
                   f"{result.stderr.strip()[-300:]!r}")
    made = sorted(set(os.listdir(os.path.join(d, "root"))) - {"scripts"})
    case.check(not made, f"--help made {made}")
    case.end()


def case_missing_packages():
    """A script run with good arguments where a package it needs is missing: one line naming the
    package and how to get it (numpy: make venv; torch and transformers, which make venv does not
    install: pip install), before it reads any file."""
    d = folder("missing")
    ckpt, shard = os.path.join(d, "no_model.bin"), os.path.join(d, "no_shard.bin")
    check_export = (script("check_export_hf.py"), ckpt, shard, "1", "8")
    train_reference = (script("train_torch_reference.py"), "--train-data", shard)
    for what, env, run, must_mention in (
            ("numpy", without(os.path.join(d, "n1"), "numpy"), check_export, ["needs numpy", "make venv"]),
            ("numpy", without(os.path.join(d, "n2"), "numpy"), train_reference, ["needs numpy", "make venv"]),
            ("torch", without(os.path.join(d, "t"), "torch"), check_export, ["needs torch", "pip install torch"]),
            ("transformers", without(os.path.join(d, "h"), "transformers", stand_ins=["torch.nn.functional"]),
             check_export, ["needs transformers", "pip install transformers"])):
        case = Case(f"{os.path.basename(run[0])} without {what}: one line saying how to get it")
        result = run_script(*run, env=env)
        for words in must_mention:
            one_error_line(case, result, words)
        case.end()


def case_reference_bad_counts():
    """train_torch_reference.py: a count out of its range is argparse's error naming that option
    alone."""
    d = folder("reference_counts")
    env = without(d, "numpy", "torch")
    flags = ["-B", "-T", "--val-batches", "--steps", "--val-every", "--warmup-steps"]
    for flag, value in (("-B", "0"), ("-T", "-1"), ("--val-batches", "0"), ("--steps", "-1"),
                        ("--val-every", "-2"), ("--warmup-steps", "-1")):
        case = Case(f"train_torch_reference.py {flag} {value}: that option named alone")
        result = run_script(script("train_torch_reference.py"), "--train-data", "x", flag, value, env=env)
        last = (result.stderr.strip().splitlines() or [""])[-1]
        case.check(result.returncode == 2 and f"{flag} {value}" in last, f"exit {result.returncode}, {last!r}")
        case.check(not any(f in last.replace(f"{flag} {value}", "") for f in flags if f != flag),
                   f"names another option: {last!r}")
        case.end()


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
                       ("bench_torch_attention.py", ["64", "1024"]),
                       ("bench_torch_attention.py", ["64", "16384", "docs=1024"]),
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
    for args, must_say in ((["64"], "error: one shape is HS"),
                           (["--masked", "64", "16384"], "error: --masked runs every masked shape"),
                           (["64", "16384", "docs=0"], "error: MASK 'docs=0'"),
                           (["64", "16384", "docs=8,"], "error: MASK 'docs=8,'")):
        name = "bench_torch_attention.py"
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
                               (["--init-from", init, "--log", init], f"{init}: is the input"),
                               (["--tokenizer", init, "--align-documents"], f"{init}: not a tokenizer file"),
                               (["--tokenizer", os.path.join(d, "none.bin")], "none.bin: no such file")):
        case = Case(f"train_torch_reference.py {' '.join(os.path.basename(a) for a in args)}: refused in one line "
                    "naming the file, before torch")
        one_error_line(case, run_script(script("train_torch_reference.py"), *train, *args, env=env), must_mention)
        case.check(open(init, "rb").read() == b"weights", "the checkpoint changed")
        case.end()
    for args, must_say in ((["--init", "nanochat", "--init-from", init],
                            "--init draws the initial model, which --init-from reads from its checkpoint"),
                           (["--init", "xavier"], "argument --init: invalid choice"),
                           (["--head-size", "96"], "argument --head-size: invalid choice"),
                           (["--embedding-beta1", "0.9"], "--embedding-beta1 is a setting of --optimizer muon"),
                           (["--optimizer", "muon", "--head-beta2", "0.96"],
                            "--head-beta2: the model's head is wte (--head tied), at --embedding-lr"),
                           (["--optimizer", "muon", "--embedding-beta2", "1"], "--embedding-beta2 1 must be in [0, 1)")):
        case = Case(f"train_torch_reference.py {' '.join(os.path.basename(a) for a in args)}: argparse's error, as "
                    "train_gpt's, before torch")
        result = run_script(script("train_torch_reference.py"), *train, *args, env=env)
        last = (result.stderr.strip().splitlines() or [""])[-1]
        case.check(result.returncode == 2 and must_say in last, f"exit {result.returncode}, {last!r}")
        case.end()
    for args in (["--init", "nanochat", "--head-size", "128"],
                 ["--arch", "modern", "--optimizer", "muon", "--embedding-beta2", "0.995", "--head-beta2", "0.96"]):
        case = Case(f"train_torch_reference.py {' '.join(args)}: taken, then one line saying it needs torch")
        one_error_line(case, run_script(script("train_torch_reference.py"), *train, *args, env=env), "needs torch")
        case.end()
    case = Case("train_torch_reference.py --align-documents without --tokenizer: argparse's error, before torch")
    result = run_script(script("train_torch_reference.py"), *train, "--align-documents", env=env)
    last = (result.stderr.strip().splitlines() or [""])[-1]
    case.check(result.returncode == 2 and last.endswith("error: --align-documents: a row starts at <|endoftext|>, "
                                                         "whose id comes from --tokenizer: give it"),
               f"exit {result.returncode}, {last!r}")
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


def save_init(path, shard, *arch_args):
    """train_gpt --save-init's initial model (seed 1337) of a d2 with a context of 16 on the shard,
    of the architecture arch_args ask for: the C writer's file. Returns the CompletedProcess."""
    return subprocess.run([os.path.join(ROOT, "train_gpt"), "--train-data", shard, "--model", "d2", "--context", "16",
                           "-T", "16", "-B", "2", *arch_args, "--save-init", path],
                          capture_output=True, text=True, timeout=120)


def edited(path, name, offset, data):
    """A copy of the file at path, named name beside it, with data written at byte offset."""
    out = os.path.join(os.path.dirname(path), name)
    with open(path, "rb") as f:
        content = bytearray(f.read())
    content[offset:offset + len(data)] = data
    with open(out, "wb") as f:
        f.write(content)
    return out


def case_architecture_options():
    """The architecture and its optimizer settings in the torch scripts, before torch; the model
    checkpoints of versions 6 and 7 (train_gpt's own) in scripts/gpt2_checkpoint.py."""
    d = folder("architecture")
    env = without(d, "torch")
    shard = os.path.join(d, "train_000000.bin")
    with open(shard, "wb") as f:  # 1000 tokens of a vocabulary of 97 (data/shard.h's header)
        f.write(array("i", [20240520, 1, 1000, 97] + [0] * 252).tobytes() + array("H", [i % 97 for i in range(1000)]).tobytes())
    train = ["--train-data", shard, "--model", "d2", "--context", "16", "-T", "16"]
    modern, ablation = os.path.join(d, "modern.bin"), os.path.join(d, "ablation.bin")
    ablation_args = ["--arch", "modern", "--rotary", "0", "--bias", "1", "--softcap", "0"]
    case = Case("train_gpt --save-init --arch modern (and an ablation): what scripts/gpt2_checkpoint.py reads, "
                "each tensor in its place")
    for path, args in ((modern, ["--arch", "modern"]), (ablation, ablation_args)):
        result = save_init(path, shard, *args)
        case.check(result.returncode == 0, f"train_gpt {' '.join(args)} --save-init: {result.stdout + result.stderr}")
    if case.check(os.path.exists(modern) and os.path.exists(ablation), "no checkpoints"):
        sys.path.insert(0, SCRIPTS)
        from gpt2_checkpoint import Checkpoint  # numpy's: make test runs this test with it
        from gpt_architecture import PRESETS
        ck = Checkpoint(modern)
        case.check((ck.version, ck.arch, tuple(ck.shape)) == (6, PRESETS["modern"], (16, 97, 2, 2, 128)),
                   f"version {ck.version}, {ck.arch}, {ck.shape}")
        # zero_init: the projections and the head 0; wte drawn, its padding rows 0
        for sl, values in ck.slices():
            if "c_proj" in sl.hf_name or sl.hf_name == "lm_head.weight":
                case.check(not values.any(), f"{sl.hf_name}: not zero")
            else:
                rows = 97 if sl.hf_name == "wte.weight" else len(values)
                case.check(values[:rows].all() and not values[rows:].any(), f"{sl.hf_name}: not drawn where it should be")
        names = [sl.hf_name for sl, _ in ck.slices()]
        case.check(names[0] == "wte.weight" and names[-1] == "lm_head.weight" and len(names) == 1 + 4 * 2 + 1,
                   f"the slices {names}")
        ab = Checkpoint(ablation)
        case.check(ab.arch._replace(rotary=1, bias=0, softcap=30.0) == PRESETS["modern"] and
                   [sl.hf_name for sl, _ in ab.slices()][:3] == ["wte.weight", "wpe.weight", "h.0.attn.c_attn.weight"],
                   f"the ablation: {ab.arch}, {[sl.hf_name for sl, _ in ab.slices()][:3]}")
    case.end()

    windowed = os.path.join(d, "windowed.bin")
    case = Case("train_gpt --save-init --arch modern --window-pattern 4,full: a checkpoint of windows")
    result = save_init(windowed, shard, "--arch", "modern", "--window-pattern", "4,full")
    case.check(result.returncode == 0, f"train_gpt --save-init: {result.stdout + result.stderr}")
    case.end()
    recipe = os.path.join(d, "2026.bin")
    case = Case("train_gpt --save-init --arch 2026: the architecture scripts/gpt_architecture.py's preset_architecture "
                "gives at the checkpoint's shape, its windows a quarter of the context, described as 2026")
    result = save_init(recipe, shard, "--arch", "2026")
    if case.check(result.returncode == 0, f"train_gpt --save-init: {result.stdout + result.stderr}"):
        from gpt_architecture import describe, preset_architecture
        ck = Checkpoint(recipe)
        case.check(ck.version == 8 and ck.arch == preset_architecture("2026", ck.shape) and
                   ck.arch.windows[:ck.arch.window_count] == (4, 0) and describe(ck.arch, ck.shape) == "2026",
                   f"version {ck.version}, {describe(ck.arch, ck.shape)}")
    case.end()
    name = "train_torch_reference.py"
    for args in (["--init-from", modern], ["--init-from", ablation] + ablation_args, ["--init-from", windowed],
                 ["--init-from", recipe], ["--init-from", recipe, "--arch", "2026"],
                 ["--init-from", recipe, "--arch", "modern", "--embedding-norm", "1", "--qk-scale", "1.2",
                  "--residual-lambdas", "1", "--value-embeddings", "1", "--smear", "1", "--backout", "1",
                  "--window-pattern", "4,full"],
                 ["--arch", "2026", "--window-pattern", "full"], ["--arch", "2026", "--normuon", "0"],
                 ["--init-from", windowed, "--arch", "modern", "--window-pattern", "4,full"],
                 ["--arch", "modern", "--window-pattern", "4,full"],
                 ["--init-from", modern, "--optimizer", "muon", "--head-lr", "0.01"],
                 ["--arch", "modern", "--optimizer", "muon", "--embedding-lr", "0.1", "--head-lr", "0.01"]):
        case = Case(f"{name} {' '.join(os.path.basename(a) for a in args)}: the architecture settled, then "
                    "one line saying it needs torch")
        one_error_line(case, run_script(script(name), *train, *args, env=env), "needs torch")
        case.end()
    def slot(value):  # a header slot's bytes: an int32, or a float by its bits
        return array("i" if isinstance(value, int) else "f", [value]).tobytes()
    for args, must_mention in (
            (["--init-from", modern, "--arch", "gpt2"], f"{modern}: the architecture asked for (gpt2) is not the "
                                                        "checkpoint's (modern)"),
            (["--init-from", modern, "--softcap", "15"], "softcap 15) is not the checkpoint's (modern)"),
            (["--init-from", recipe, "--window-pattern", "full"], "residual lambdas, value embeddings, smear, backout) "
                                                                  "is not the checkpoint's (2026)"),
            (["--init-from", recipe, "--arch", "modern"], "(modern) is not the checkpoint's (2026)"),
            (["--init-from", windowed, "--window-pattern", "4"], "(modern, windows 4) is not the checkpoint's "
                                                                 "(modern, windows 4,full)"),
            (["--init-from", ablation, "--arch", "modern"], "is not the checkpoint's (learned positions"),
            (["--init-from", edited(modern, "rotary2.bin", 4 * 8, slot(2))], "corrupt header: rotary 2 is neither"),
            (["--init-from", edited(modern, "base.bin", 4 * 9, slot(0.5))],
             "corrupt header: the rotary base must be a finite number above 1"),
            (["--init-from", edited(modern, "softcap.bin", 4 * 16, slot(0.5))],
             "corrupt header: the softcap must be 0 (none) or a finite number of at least 1"),
            (["--init-from", edited(modern, "slot84.bin", 4 * 84, slot(5))],
             "corrupt header: slot 84 holds 5, past the architecture"),
            (["--init-from", edited(modern, "documents.bin", 4 * 17, slot(1))],
             "the model's attention sees a row's own document alone"),
            (["--init-from", edited(modern, "v7.bin", 4, slot(7))], "trailing bytes")):
        case = Case(f"{name} {' '.join(os.path.basename(a) for a in args)}: refused in one line naming the "
                    "checkpoint, before torch")
        one_error_line(case, run_script(script(name), *train, *args, env=env), must_mention)
        case.end()
    for script_name, good in ((name, train), ("bench_torch_gpt2.py", [])):
        for args, must_mention in ((["--arch", "gpt3"], "invalid choice: 'gpt3'"), (["--norm", "cube"], "--norm"),
                                   (["--softcap", "-1"], "softcap -1): the softcap must be 0 (none) or a finite"),
                                   (["--arch", "modern", "--softcap", "1e-40"], "softcap 1e-40): the softcap must"),
                                   (["--arch", "modern", "--softcap", "0.5"], "softcap 0.5): the softcap must"),
                                   (["--arch", "modern", "--rotary-base", "1"],
                                    "(base 1), rms norm, qk-norm, relu2, no bias, untied head, zero init, softcap 30): "
                                    "the rotary base must be a finite number above 1"),
                                   (["--arch", "modern", "--rotary-base", "inf"], "the rotary base must be"),
                                   (["--rotary-base", "5000"], "learned positions (rotary base 5000), layernorm, "
                                    "no qk-norm, gelu, bias, tied head, no zero init, no softcap): a rotary base "
                                    "without rotary, where it has no effect"),
                                   (["--arch", "modern", "--rotary", "0", "--rotary-base", "5000"],
                                    "a rotary base without rotary"),
                                   (["--arch", "modern", "--window-pattern", "4,x"],
                                    "--window-pattern '4,x': 'x' is neither a number of keys"),
                                   (["--arch", "modern", "--window-pattern", "4,,8"], "'' is neither"),
                                   (["--arch", "modern", "--window-pattern", ",".join(["4"] * 65)],
                                    "more than 64 windows"),
                                   (["--arch", "modern", "--window-pattern", "100000"],
                                    "windows 100000): a window is no narrower than the context")):
            case = Case(f"{script_name} {' '.join(args)}: refused before torch")
            result = run_script(script(script_name), *good, *args, env=env)
            case.check(result.returncode == 2 and must_mention in result.stderr and "needs torch" not in result.stderr,
                       f"exit {result.returncode}, stderr {result.stderr.strip()[-200:]!r}")
            case.end()
    # 2026's key windows, a quarter of the context (the reference's --context, the benchmark's -T).
    for script_name, args in ((name, [*train, "--arch", "2026", "--context", "3", "-T", "3"]),
                              ("bench_torch_gpt2.py", ["--arch", "2026", "-T", "3", "--layers", "2"])):
        case = Case(f"{script_name} --arch 2026 at a context of 3: refused before torch")
        result = run_script(script(script_name), *args, env=env)
        case.check(result.returncode == 2 and "--arch 2026 at context 3, 2 layers: its key windows are the context / 4, "
                   "rounded down: a context of 3 leaves them no key (give 4 or more)" in result.stderr,
                   f"exit {result.returncode}, stderr {result.stderr.strip()[-200:]!r}")
        case.end()
    for args, must_mention in ((["--head-lr", "0.01"], "--head-lr is a setting of --optimizer muon"),
                               (["--arch", "modern", "--adam-beta1", "0.9"], "--adam-beta1 is a setting"),
                               (["--optimizer", "muon", "--head-lr", "0.01"], "the model's head is wte"),
                               (["--arch", "modern", "--optimizer", "muon", "--muon-momentum", "1"],
                                "--muon-momentum 1 must be in [0, 1)"),
                               (["--arch", "modern", "--lr", "0"], "--lr 0 must be > 0"),
                               (["--lr", "inf"], "--lr inf must be > 0"),
                               (["--weight-decay", "-1"], "--weight-decay -1 must be >= 0"),
                               (["--weight-decay", "1e30"], "--weight-decay 1e+30: times --lr 0.0003 it is 3e+26, "
                                                            "and must stay below 1"),
                               (["--arch", "modern", "--optimizer", "muon", "--weight-decay", "25"],
                                "--weight-decay 25: times --embedding-lr 0.05 it is 1.25, and must stay below 1"),
                               (["--grad-clip", "-1"], "--grad-clip -1 must be >= 0"),
                               (["--optimizer", "muon", "--embedding-lr", "0"], "--embedding-lr 0 must be > 0"),
                               (["--optimizer", "muon", "--adam-beta2", "1"], "--adam-beta2 1 must be in [0, 1)"),
                               (["--min-lr-frac", "2"], "--min-lr-frac 2 must be in [0, 1]"),
                               (["--muon-qkv", "split"], "--muon-qkv is a setting of --optimizer muon"),
                               (["--normuon"], "--normuon is a setting of --optimizer muon"),
                               (["--normuon-beta2", "0.9"], "--normuon-beta2 is a setting of --optimizer muon"),
                               (["--optimizer", "muon", "--normuon-beta2", "0.9"],
                                "--normuon-beta2 without --normuon has no effect"),
                               (["--optimizer", "muon", "--normuon", "--normuon-beta2", "1"],
                                "--normuon-beta2 1 must be in [0, 1)"),
                               (["--optimizer", "muon", "--cautious-weight-decay"],
                                "--cautious-weight-decay without --weight-decay has no effect"),
                               (["--optimizer", "muon", "--weight-decay-schedule", "linear"],
                                "--weight-decay-schedule linear without --weight-decay has no effect"),
                               (["--optimizer", "muon", "--muon-ns", "cubic"], "invalid choice: 'cubic'"),
                               (["--seed", "-1"], "--seed -1 must be 0 to 2^64 - 1"),
                               (["--arch", "modern", "--window-pattern", "4,4,4"],
                                "the window pattern is longer than the layers"),
                               (["--model", "d5"], "--model d5: not a preset (d2, d6, d12")):
        case = Case(f"{name} {' '.join(args)}: refused before torch")
        result = run_script(script(name), *train, *args, env=env)
        case.check(result.returncode == 2 and must_mention in result.stderr, f"exit {result.returncode}, "
                   f"stderr {result.stderr.strip()[-200:]!r}")
        case.end()
    # The optimizer's defaults: --arch's preset, else the one nearest the architecture (the options',
    # or the checkpoint's started from), as train_gpt takes them; settled in this process.
    sys.path.insert(0, SCRIPTS)
    import train_torch_reference as reference
    from gpt2_checkpoint import Checkpoint
    uncapped = edited(modern, "uncapped.bin", 4 * 16, slot(0.0))
    from gpt_architecture import preset_architecture
    from gpt_parameters import Shape
    from gpt_schedule import Schedule, f32
    # 2026's defaults: Muon with head pairs and NorMuon, weight decay 0.1, modern's rates, a warm-down
    # over the last 65% to 0.05, the momentum from 0.85 over 300 steps (train_gpt's, test_train_gpt_inputs.sh).
    recipe_muon = {"optimizer": "muon", "lr": 0.02, "embedding_lr": 0.05, "head_lr": 0.002, "weight_decay": 0.1,
                   "muon_qkv": "head-pairs", "muon_ns": "quintic", "normuon": True, "normuon_beta2": 0.95,
                   "schedule": Schedule("wsd", 0, f32(0.05), f32(0.65), 300, f32(0.85))}
    modern_parts = ["--rotary", "1", "--norm", "rms", "--qk-norm", "1", "--mlp", "relu2", "--bias", "0", "--head",
                    "untied", "--zero-init", "1"]
    for args, init, want in ((["--arch", "modern", "--softcap", "0"], None, {"lr": 2e-3}),
                             (["--arch", "modern", "--qk-norm", "0", "--optimizer", "muon"], None,
                              {"lr": 0.02, "embedding_lr": 0.05}),
                             (modern_parts, None, {"lr": 2e-3, "weight_decay": 0.1, "grad_clip": 1.0}),
                             (["--rotary", "1"], None, {"lr": 3e-4}),
                             (["--arch", "gpt2", *modern_parts, "--softcap", "30"], None, {"lr": 3e-4}),
                             ([], uncapped, {"lr": 2e-3}),
                             (["--optimizer", "muon"], uncapped, {"embedding_lr": 0.05, "head_lr": 0.002}),
                             (["--optimizer", "muon"], None, {"muon_qkv": "fused", "muon_ns": "quintic",
                                                              "cautious_weight_decay": False, "normuon": False,
                                                              "normuon_beta2": 0.0}),
                             (["--optimizer", "muon", "--muon-qkv", "head-pairs", "--muon-ns", "polar", "--normuon",
                               "--cautious-weight-decay", "--weight-decay", "0.1"], None,
                              {"muon_qkv": "head-pairs", "muon_ns": "polar", "cautious_weight_decay": True,
                               "normuon": True, "normuon_beta2": 0.95}),
                             (["--arch", "2026"], None, recipe_muon),
                             ([], recipe, recipe_muon),
                             (["--arch", "2026"], recipe, recipe_muon),
                             (["--arch", "2026", "--optimizer", "adamw"], None,
                              {"optimizer": "adamw", "lr": 2e-3, "weight_decay": 0.1, "muon_qkv": "fused",
                               "normuon": False, "normuon_beta2": 0.0,
                               "schedule": Schedule("wsd", 0, f32(0.05), f32(0.65))}),
                             (["--arch", "2026", "--optimizer", "muon", "--lr", "0.03", "--embedding-lr", "0.1",
                               "--muon-qkv", "fused", "--normuon", "0", "--weight-decay", "0", "--lr-schedule",
                               "cosine", "--min-lr-frac", "0", "--momentum-warmup-steps", "0"], None,
                              {"optimizer": "muon", "lr": 0.03, "embedding_lr": 0.1, "weight_decay": 0.0,
                               "muon_qkv": "fused", "normuon": False, "normuon_beta2": 0.0, "schedule": Schedule()}),
                             (["--arch", "2026", "--warmdown-frac", "0.5", "--momentum-start", "0.9"], None,
                              {"schedule": Schedule("wsd", 0, f32(0.05), f32(0.5), 300, f32(0.9))}),
                             (["--arch", "2026", "--context", "512", "-T", "64"], None,
                              {"arch": preset_architecture("2026", Shape(512, 0, 12, 12, 768))}),
                             (["--arch", "modern", "--optimizer", "muon"], None,
                              {"muon_qkv": "fused", "normuon": False, "schedule": Schedule()})):
        given = " ".join(args + (["--init-from", "a 2026 model" if init == recipe else "an uncapped modern model"]
                                 if init else []))
        case = Case(f"{name} {given}: the defaults of "
                    f"{'--arch' if '--arch' in args else 'the preset nearest the architecture'}")
        ap, a = reference.parse_args(["--train-data", shard, *args])
        reference.settle_architecture(ap, a, Checkpoint(init) if init else None)
        got = {key: getattr(a, key) for key in want}
        case.check(got == want, f"{got}, expected {want}")
        case.end()
    case = Case("bench_torch_gpt2.py --arch modern --optimizer muon without torch: one line saying it needs torch")
    one_error_line(case, run_script(script("bench_torch_gpt2.py"), "--arch", "modern", "--optimizer", "muon",
                                    env=env), "needs torch")
    case.end()


# The GPU scripts' commands: on PATH, and at the paths they run from the repository root.
PATH_STUBS = ["make", "nvidia-smi", "python3", "torchrun", "compute-sanitizer"]
LOCAL_STUBS = ["train_gpt", "prepare_data", "generate", "build/bench/bench_attention", "build/bench/bench_matmul",
               "build/bench/bench_fp8_algorithms",
               "build/tests/unit/attention/test_attention", "build/tests/unit/attention/test_decode",
               "build/tests/unit/layers/test_matmul_rows", "build/tests/unit/layers/test_fp8",
               "build/tests/unit/train/test_batches", "build/tests/unit/gpt/test_gpt",
               "tests/programs/test_generation.sh", "tests/programs/test_evaluate.sh", "baseline/train_gpt"]
# Each script: the number of operands it takes, and those of a run (a dataset and a baseline tree,
# which gpu_run makes).
GPU_SCRIPTS = {"gpu/check.sh": (1, []), "gpu/scaling.sh": (0, []), "gpu/speed_race.sh": (0, []),
               "gpu/attention.sh": (1, []), "gpu/decode.sh": (1, []), "gpu/parity.sh": (1, ["data"]),
               "gpu/modern.sh": (1, ["data"]), "gpu/muon.sh": (1, ["data"]), "gpu/masks.sh": (1, ["data"]),
               "gpu/recipe.sh": (1, ["data"]), "gpu/fp8.sh": (2, ["data", "baseline"])}
PARITY_VARIABLES = ("MODELS", "SIDES", "SEEDS", "FLASHGPT", "FLASHGPT_BASE", "RACE", "ARCH", "OPTIMIZER",
                    "WEIGHT_DECAY", "MUON_LR", "MODERN_LR", "PARTS", "MODE", "PARTS_FILTER", "NEW_PRESET", "RACE_SET",
                    "RACE_BATCHES", "RACE_STEPS", "RACE_WARMUP", "FILL_BATCHES", "SANITIZER_LIMIT_S")


def gpu_folder(name):
    """The folder of gpu_run's runs of scripts/NAME."""
    return os.path.join(TMP, "args_" + name.replace("/", "_"))


def gpu_run(name, args, stub_status, env_vars=None, where=".", stub_bodies=None, outputs=None):
    """Runs scripts/NAME ARGS (with env_vars) in the folder where, under a fresh folder that
    stands for the repository (its scripts/gpu/ the script and common.sh, a dataset in data/, a
    flashgpt tree in baseline/: its Makefile and a train_gpt) and where every command the script
    calls is a stub that writes its command line to ran.log and exits with stub_status(command),
    or runs stub_bodies[its path] (shell) when given; outputs: {first argument: text} a stub prints
    when its first argument is that. Returns (CompletedProcess, the commands that ran)."""
    d = folder(name.replace("/", "_"))
    bin_dir, ran = os.path.join(d, "bin"), os.path.join(d, "ran.log")
    printed = ""
    for i, (first, text) in enumerate((outputs or {}).items()):
        with open(os.path.join(d, f"output{i}.txt"), "w") as f:
            f.write(text)
        printed += f'[ "$1" = "{first}" ] && cat "{os.path.join(d, f"output{i}.txt")}"\n'
    for stub in [os.path.join("bin", s) for s in PATH_STUBS] + LOCAL_STUBS:
        path = os.path.join(d, stub)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        body = (stub_bodies or {}).get(stub, f"exit {stub_status(os.path.basename(stub))}")
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\necho {os.path.basename(stub)} "$@" >> "{ran}"\n{printed}{body}\n')
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    open(os.path.join(d, "baseline", "Makefile"), "w").close()
    os.makedirs(os.path.join(d, "scripts", "gpu"))
    for copied in (name, "gpu/common.sh"):
        shutil.copy(script(copied), os.path.join(d, "scripts", copied))
    os.makedirs(os.path.join(d, "data"))
    for data in ("tokenizer.bin", "train_000000.bin", "val_000000.bin"):
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


def check_refused(title, name, args, env_vars, must_mention):
    """A case called title: scripts/NAME with args and env_vars refuses in one line naming must_mention, and runs
    nothing."""
    case = Case(title)
    result, ran = gpu_run(name, args, lambda stub: 0, env_vars)
    one_error_line(case, result, must_mention)
    case.check(not ran, f"ran {ran}")
    case.end()


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
            check_refused(f"{name} {' '.join(args)}: refused in one line, nothing run", name, args, None, must_mention)
        case = Case(f"{name} run from another folder: refused in one line, nothing run or made")
        result, ran = gpu_run(name, [os.path.join("..", a) for a in run_args], lambda stub: 0, where="elsewhere")
        one_error_line(case, result, "run it from the repository root")
        case.check(not ran, f"ran {ran}")
        elsewhere = os.path.join(gpu_folder(name), "elsewhere")
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
        check_refused(f"gpu/parity.sh with {what}: refused in one line, nothing run", "gpu/parity.sh", ["data"],
                      dict(env_vars, OUT="logs"), must_mention)
    case = Case("gpu/parity.sh with MODELS=d6-t256 and SIDES of each kind: runs each, the reference from "
                "train_gpt's initial weights of the seed")
    result, ran = gpu_run("gpu/parity.sh", ["data"], lambda stub: 0,
                          {"MODELS": "d6-t256", "SIDES": "flashgpt flashgpt-base reference+residual",
                           "FLASHGPT_BASE": "./train_gpt", "SEEDS": "1 2", "OUT": "logs"})
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    # Each seed: the initial weights, flashgpt, flashgpt-base, the reference; then the curves.
    case.check(ran.count("train_gpt") == 6 and ran.count("python3") == 3, f"ran {ran}")
    lines = ran_lines("gpu/parity.sh")
    for seed in (1, 2):
        init = f"logs/parity/d6-t256/init-s{seed}.bin"
        saves = [line for line in lines if line.startswith("train_gpt ") and f"--save-init {init}" in line]
        case.check(len(saves) == 1 and f"--seed {seed} " in saves[0], f"seed {seed}: train_gpt --save-init {saves}")
        starts = [line for line in lines if "train_torch_reference.py" in line and f"--init-from {init}" in line]
        case.check(len(starts) == 1 and f"--seed {seed} " in starts[0], f"seed {seed}: the reference {starts}")
    case.end()


def ran_lines(name):
    """The command lines the stubs of the last gpu_run of scripts/NAME wrote."""
    return open(os.path.join(gpu_folder(name), "ran.log")).read().splitlines()


def case_gpu_parity_architecture():
    for env_vars, must_mention in (({"ARCH": "gpt3"}, "ARCH gpt3: expected gpt2, modern or 2026"),
                                   ({"ARCH": "2026", "OPTIMIZER": "adamw"}, "OPTIMIZER adamw: ARCH 2026"),
                                   ({"ARCH": "2026", "MUON_LR": "0.03"}, "MUON_LR: ARCH 2026"),
                                   ({"ARCH": "2026", "MODERN_LR": "3e-3"}, "MODERN_LR: ARCH 2026")):
        what = " ".join(f"{k}={v}" for k, v in env_vars.items())
        check_refused(f"gpu/parity.sh with {what}: refused in one line, nothing run", "gpu/parity.sh", ["data"],
                      dict(env_vars, OUT="logs"), must_mention)
    # The options of the preset's optimizer and schedule, which ARCH=2026 leaves to the preset.
    recipe_options = ["--optimizer", "--lr", "--embedding-lr", "--head-lr", "--vector-lr", "--min-lr-frac"]
    shared = ["--warmup-steps 25 --grad-clip 1 ", "--val-every 25 --val-batches 20 "]
    # (variables, what every train_gpt and reference line holds, what none does, the logs' folder)
    for env_vars, every, none, folder_name in (
            ({}, ["--optimizer adamw --lr 1e-3 ", "--min-lr-frac 0.1 --weight-decay 0.1 "] + shared, ["--arch"],
             "d6-t256"),
            ({"ARCH": "2026"}, ["--arch 2026 "] + shared, recipe_options + ["--weight-decay"], "d6-t256-2026"),
            ({"ARCH": "2026", "OPTIMIZER": "muon", "WEIGHT_DECAY": "0"}, ["--arch 2026 ", "--weight-decay 0 "] + shared,
             recipe_options, "d6-t256-2026-wd0"),
            ({"ARCH": "modern"}, ["--arch modern ", "--optimizer adamw --lr 2e-3 "], ["--embedding-lr"],
             "d6-t256-modern"),
            ({"ARCH": "modern", "OPTIMIZER": "muon"},
             ["--arch modern ", "--optimizer muon --lr 0.02 --embedding-lr 0.05 --head-lr 0.002 ", "--weight-decay 0 "],
             [], "d6-t256-modern-muon"),
            ({"OPTIMIZER": "muon", "WEIGHT_DECAY": "0.1"},
             ["--optimizer muon --lr 0.02 --vector-lr 0.002 --embedding-lr 0.001 ", "--weight-decay 0.1 "],
             ["--arch", "--head-lr"], "d6-t256-muon-wd0.1"),
            ({"ARCH": "modern", "ARGS": "--softcap 0 --qk-norm 0"}, ["--arch modern ", " --softcap 0 --qk-norm 0 "], [],
             "d6-t256-modern--softcap0--qk-norm0")):
        what = " ".join(f"{k}={v}" for k, v in env_vars.items()) or "no ARCH"
        case = Case(f"gpu/parity.sh with {what}: both sides train that recipe, logs in {folder_name}/")
        result, _ = gpu_run("gpu/parity.sh", ["data"], lambda stub: 0,
                            dict(env_vars, MODELS="d6-t256", SEEDS="1", OUT="logs"))
        case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
        runs = [line for line in ran_lines("gpu/parity.sh")
                if line.startswith("train_gpt ") or "train_torch_reference.py" in line]
        case.check(len(runs) == 3, f"ran {runs}")
        for line in runs:
            for want in every:
                case.check(want in line + " ", f"no {want!r} in {line!r}")
            for unwanted in none:
                case.check(unwanted not in line, f"{unwanted!r} in {line!r}")
            case.check(f"logs/parity/{folder_name}/" in line, f"not in {folder_name}/: {line!r}")
        case.check(any("compare_curves.py" in line and "--train-loss" in line for line in ran_lines("gpu/parity.sh")),
                   "no compare_curves.py --train-loss")
        case.end()


def case_gpu_masks_runs():
    check_refused("gpu/masks.sh without a dataset: refused in one line, nothing run", "gpu/masks.sh", [],
                  {"OUT": "logs"}, "the dataset folder is needed")
    case = Case("gpu/masks.sh: the modern recipe at T 8192 B 2 with documents and the windows of WINDOWS, then "
                "dense at T 1024 B 16, then the table against the dense run")
    result, _ = gpu_run("gpu/masks.sh", ["data"], lambda stub: 0, {"WINDOWS": "full,256", "OUT": "logs"})
    lines = ran_lines("gpu/masks.sh")
    runs = [line for line in lines if line.startswith("train_gpt ")]
    case.check(result.returncode == 0 and len(runs) == 2, f"exit {result.returncode}, train_gpt runs {runs}")
    if len(runs) == 2:
        masked, dense = (line.split() for line in runs)
        case.check("--arch modern" in runs[0] and "-T 8192 -B 2" in runs[0] and "--document-mask" in masked and
                   "--window-pattern full,256" in runs[0], f"the masked run: {runs[0]}")
        case.check("--arch modern" in runs[1] and "-T 1024 -B 16" in runs[1] and "--document-mask" not in dense and
                   "--window-pattern" not in dense, f"the dense run: {runs[1]}")
        steps = [words[words.index("--steps") + 1] for words in (masked, dense)]
        case.check(steps[0] == steps[1], f"steps {steps}")
    case.check(any(line.startswith("python3 scripts/compare_curves.py --runs --baseline dense") for line in lines),
               f"no table: {lines}")
    case.end()


def case_gpu_modern_parts():
    for env_vars, args, must_mention in (({"PARTS": " "}, ["data"], "PARTS is empty"),
                                         ({"PARTS": "learning tuning"}, ["data"], "no part called tuning"),
                                         ({"PARTS": "learning"}, [], "needs the dataset folder"),
                                         ({}, [], "needs the dataset folder")):
        what = " ".join(f"{k}='{v}'" for k, v in env_vars.items()) or "both parts"
        check_refused(f"gpu/modern.sh with {what}{'' if args else ' and no dataset'}: refused in one line, nothing run",
                      "gpu/modern.sh", args, dict(env_vars, OUT="logs"), must_mention)
    case = Case("gpu/modern.sh with PARTS=speed and no dataset: each recipe in train_gpt, modern-muon in "
                "torch.compile, at both shapes")
    result, _ = gpu_run("gpu/modern.sh", [], lambda stub: 0, {"PARTS": "speed", "OUT": "logs"})
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    lines = ran_lines("gpu/modern.sh")
    for T, B in (("1024", "64"), ("16384", "4")):
        shape = f"--context {T} -T {T} -B {B} "
        trains = [line for line in lines if line.startswith("train_gpt ") and shape in line]
        case.check(len(trains) == 3 and sum("--arch modern --optimizer muon" in line for line in trains) == 1 and
                   sum("--optimizer adamw --lr 6e-4" in line for line in trains) == 1, f"T {T}: {trains}")
        torch = [line for line in lines if "bench_torch_gpt2.py" in line and f"-B {B} -T {T} " in line]
        case.check(len(torch) == 1 and "--arch modern --optimizer muon" in torch[0], f"T {T}: {torch}")
    case.end()
    case = Case("gpu/modern.sh with PARTS=learning: the three recipes in train_gpt, then the PyTorch modern-muon "
                "under torch.compile from train_gpt's initial weights")
    result, _ = gpu_run("gpu/modern.sh", ["data"], lambda stub: 0, {"PARTS": "learning", "OUT": "logs"})
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    lines = ran_lines("gpu/modern.sh")
    for recipe, options in (("gpt2-adamw", "--optimizer adamw --lr 6e-4 --weight-decay 0.1"),
                            ("modern-muon", "--arch modern --optimizer muon"),
                            ("modern-adamw", "--arch modern --optimizer adamw")):
        runs = [line for line in lines if line.startswith("train_gpt ") and f"--log logs/modern/{recipe}.csv" in line]
        case.check(len(runs) == 1 and f"{options} --log" in runs[0], f"{recipe}: {runs}")
    init = "logs/modern/init-modern-s1.bin"
    saves = [line for line in lines if line.startswith("train_gpt ") and f"--save-init {init}" in line]
    torch = [line for line in lines if "train_torch_reference.py" in line]
    case.check(len(saves) == 1 and "--arch modern --optimizer muon" in saves[0] and "--seed 1 " in saves[0],
               f"the initial weights: {saves}")
    case.check(len(torch) == 1 and f"--arch modern --optimizer muon --init-from {init} --compile" in torch[0] and
               "--seed 1 " in torch[0], f"the reference: {torch}")
    case.check(lines.index(saves[0]) < lines.index(torch[0]) if saves and torch else False, "the order")
    case.end()
    case = Case("gpu/modern.sh with PARTS=profile and no dataset: each recipe in train_gpt, profiled at T 1024, B 64")
    result, _ = gpu_run("gpu/modern.sh", [], lambda stub: 0, {"PARTS": "profile", "OUT": "logs"})
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    runs = [line for line in ran_lines("gpu/modern.sh") if line.startswith("train_gpt ")]
    case.check(len(runs) == 3 and all("-T 1024 -B 64 " in line and "--profile 3 " in line for line in runs) and
               sum("--arch modern --optimizer muon" in line for line in runs) == 1, f"the runs: {runs}")
    case.end()


RECIPE_TABLE = """target: validation loss 2.6000 (the best base run's final, base)

| run | final val loss | step reaching the target | training s to it | share of base's steps, time | tokens/s |
|---|---|---|---|---|---|
| base | 2.6000 | 461 of 461 | 13.0 of 13.0 | 100%, 100% | 585.0K |
| candidate | 1.9000 | 200 of 461 | 6.5 of 15.0 | 43%, 50% | 500.0K |
| candidate-head-size-128 | 1.9500 | 240 of 461 | 7.0 of 13.4 | 52%, 54% | 560.0K |
| candidate-muon-lr-0.04 | 2.1000 | 230 of 461 | 6.0 of 12.1 | 50%, 46% | 600.0K |

| step | base | candidate | candidate-head-size-128 | candidate-muon-lr-0.04 |
|---|---|---|---|---|
| 461 | 2.6000 | 1.9000 | 1.9500 | 2.1000 |
"""


def case_gpu_recipe_runs():
    for env_vars, args, must_mention in (({"MODE": "both"}, ["data"], "MODE both"),
                                         ({"PARTS_FILTER": "qk-scale no-such-part"}, ["data"],
                                          "no row called no-such-part"),
                                         ({"MODE": "sets", "PARTS_FILTER": "qk-scale"}, ["data"],
                                          "no row called qk-scale (the rows of SETS"),
                                         ({"MODE": "race", "PARTS_FILTER": "candidate"}, ["data"], "runs RACE_SET"),
                                         ({"MODE": "race", "RACE_SET": "candidate fastest"}, ["data"],
                                          "no set called fastest"),
                                         ({"MODE": "race", "RACE_SET": ""}, ["data"], "RACE_SET is empty"),
                                         ({"MODE": "race", "RACE_BATCHES": "16 x"}, ["data"], "x is not a batch size"),
                                         ({"MODE": "race", "RACE_BATCHES": " "}, ["data"], "RACE_BATCHES is empty"),
                                         ({"MODE": "race", "RACE_STEPS": "10"}, ["data"], "RACE_STEPS 10"),
                                         ({"MODE": "race", "RACE_WARMUP": "-1"}, ["data"], "RACE_WARMUP -1"),
                                         ({}, [], "give the dataset folder")):
        what = " ".join(f"{k}='{v}'" for k, v in env_vars.items()) or "no dataset"
        check_refused(f"gpu/recipe.sh with {what}: refused in one line, nothing run", "gpu/recipe.sh", args,
                      dict(env_vars, OUT="logs"), must_mention)
    base = "--arch modern --optimizer muon --context 1024 -T 1024 "
    case = Case("gpu/recipe.sh MODE=alone: the base, then the base with each part PARTS_FILTER picks (and the "
                "part it needs), the same seed, then the table against the base; the logs in one file under OUT")
    result, _ = gpu_run("gpu/recipe.sh", ["data"], lambda stub: 0,
                        {"PARTS_FILTER": "qk-scale cautious* smear", "OUT": "logs"})
    case.check(result.returncode == 0 and "estimate: 4 runs" in result.stdout,
               f"exit {result.returncode}: {result.stdout[:200]!r} {result.stderr.strip()!r}")
    lines = ran_lines("gpu/recipe.sh")
    runs = [line for line in lines if line.startswith("train_gpt ")]
    case.check(len(runs) == 4 and all(base in line and "-B 16 " in line and "--seed 1 " in line for line in runs),
               f"the runs: {runs}")
    if len(runs) == 4:
        case.check(runs[0].endswith("--val-batches 20 --log build/recipe/alone/base.csv"), f"the base: {runs[0]}")
        case.check("--weight-decay 0.1 --cautious-weight-decay --log "
                   "build/recipe/alone/with-cautious-weight-decay.csv" in runs[1], f"cautious decay: {runs[1]}")
        case.check("--qk-scale 1.2 --log build/recipe/alone/with-qk-scale.csv" in runs[2], f"qk scale: {runs[2]}")
        case.check("--val-batches 20 --smear 1 --log build/recipe/alone/with-smear.csv" in runs[3], f"smear: {runs[3]}")
    case.check(any(line.startswith("python3 scripts/compare_curves.py --runs --baseline base") for line in lines),
               f"no table: {lines}")
    out = os.path.join(gpu_folder("gpu/recipe.sh"), "logs")
    case.check(os.listdir(out) == ["recipe-alone.tar.gz"], f"OUT holds {os.listdir(out)}")
    case.end()
    case = Case("gpu/recipe.sh MODE=out: the base, the full set, then the set without each part (and without the "
                "parts that need it); a part the set does not hold is left out")
    result, _ = gpu_run("gpu/recipe.sh", ["data"], lambda stub: 0,
                        {"MODE": "out", "PARTS_FILTER": "weight-decay muon-qkv-head-pairs qk-scale",
                         "NEW_PRESET": "--qk-scale 1.2  --weight-decay 0.1 --cautious-weight-decay --muon-qkv split",
                         "OUT": "logs"})
    case.check(result.returncode == 0 and "muon-qkv-head-pairs is not in the full set" in result.stdout,
               f"exit {result.returncode}: {result.stdout[:300]!r}")
    runs = [line for line in ran_lines("gpu/recipe.sh") if line.startswith("train_gpt ")]
    want = [("base", ""),
            ("full", "--qk-scale 1.2 --weight-decay 0.1 --cautious-weight-decay --muon-qkv split "),
            ("without-weight-decay", "--qk-scale 1.2 --muon-qkv split "),
            ("without-qk-scale", "--weight-decay 0.1 --cautious-weight-decay --muon-qkv split ")]
    case.check(len(runs) == len(want), f"the runs: {runs}")
    for line, (name, options) in zip(runs, want):
        case.check(line.endswith(f"--val-batches 20 {options}--log build/recipe/out/{name}.csv"), f"{name}: {line}")
    case.end()
    # The preset the measurements support: the gains at their measured values, and nanochat's parts.
    preset = ("--muon-qkv head-pairs --normuon --weight-decay 0.1 --lr-schedule wsd --warmdown-frac 0.65 "
              "--min-lr-frac 0.05 --momentum-warmup-steps 300 --momentum-start 0.85 --embedding-norm 1 "
              "--qk-scale 1.2 --residual-lambdas 1 --window-pattern 256,256,256,full --value-embeddings 1 --smear 1 "
              "--backout 1")
    case = Case("gpu/recipe.sh MODE=out without NEW_PRESET: the full set of NEW_PRESET_PARTS, then without "
                "nanochat's three parts together")
    result, _ = gpu_run("gpu/recipe.sh", ["data"], lambda stub: 0,
                        {"MODE": "out", "PARTS_FILTER": "nanochat-parts", "OUT": "logs"})
    runs = [line for line in ran_lines("gpu/recipe.sh") if line.startswith("train_gpt ")]
    case.check(result.returncode == 0 and len(runs) == 3, f"exit {result.returncode}, the runs: {runs}")
    if len(runs) == 3:
        case.check(runs[1].endswith(f"--val-batches 20 {preset} --log build/recipe/out/full.csv"), f"full: {runs[1]}")
        case.check(runs[2].endswith("--val-batches 20 " + preset.replace(" --value-embeddings 1 --smear 1 --backout 1",
                                                                         "") +
                                    " --log build/recipe/out/without-nanochat-parts.csv"), f"without: {runs[2]}")
    case.end()
    case = Case("gpu/recipe.sh MODE=sets: the base, then each set PARTS_FILTER picks, in SETS' order, {preset} the "
                "full set; the table against the base says which sets meet the bars")
    result, _ = gpu_run("gpu/recipe.sh", ["data"], lambda stub: 0,
                        {"MODE": "sets", "PARTS_FILTER": "candidate-muon-lr-0.04 candidate-head* candidate",
                         "OUT": "logs"}, outputs={"scripts/compare_curves.py": RECIPE_TABLE})
    case.check(result.returncode == 0 and "estimate: 4 runs" in result.stdout,
               f"exit {result.returncode}: {result.stdout[:300]!r} {result.stderr.strip()!r}")
    runs = [line for line in ran_lines("gpu/recipe.sh") if line.startswith("train_gpt ")]
    want = [("base", ""), ("candidate", preset + " "), ("candidate-head-size-128", preset + " --head-size 128 "),
            ("candidate-muon-lr-0.04", preset + " --lr 0.04 ")]
    case.check(len(runs) == len(want), f"the runs: {runs}")
    for line, (name, options) in zip(runs, want):
        case.check(base in line and line.endswith(f"--val-batches 20 {options}--log build/recipe/sets/{name}.csv"),
                   f"{name}: {line}")
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
            for line in result.stdout.splitlines() if line.startswith("| ") and line.count("|") == 9}
    for name, delta, ms, bars in (("base", "+0.0000", "28.0", ""), ("candidate", "-0.7000", "32.8", "met"),
                                  ("candidate-head-size-128", "-0.6500", "29.3", "missed"),
                                  ("candidate-muon-lr-0.04", "-0.5000", "27.3", "missed")):
        got = rows.get(name)
        case.check(got is not None and (got[1], got[2], got[6]) == (delta, ms, bars), f"{name}: {got}")
    case.end()
    case = Case("gpu/recipe.sh MODE=race: train_gpt and the PyTorch reference under torch.compile of the candidate "
                "and of it at full attention, each at B 16 and 64, the same options, no validation; the reference "
                "takes every option")
    result, _ = gpu_run("gpu/recipe.sh", ["data"], lambda stub: 0, {"MODE": "race", "OUT": "logs"})
    case.check(result.returncode == 0 and "estimate: 8 runs" in result.stdout,
               f"exit {result.returncode}: {result.stdout[:300]!r} {result.stderr.strip()!r}")
    lines = ran_lines("gpu/recipe.sh")
    runs = [line for line in lines if line.startswith("train_gpt ") and "--log" in line]
    torch = [line for line in lines if "train_torch_reference.py" in line]
    case.check(len(runs) == 4 and len(torch) == 4, f"train_gpt {runs}, the reference {torch}")
    dense = preset.replace(" --window-pattern 256,256,256,full", "")
    for i, (race_set, options, batch) in enumerate((("candidate", preset, "16"), ("candidate", preset, "64"),
                                                    ("candidate-dense", dense, "16"),
                                                    ("candidate-dense", dense, "64"))):
        for lines_of_side, side, tail in ((runs, "train_gpt", " "), (torch, "torch", " --compile ")):
            line = lines_of_side[i] if i < len(lines_of_side) else ""
            case.check(base in line and f"-B {batch} --steps 40 --val-every 0 {options}{tail}--log "
                       f"build/recipe/race/race-{race_set}-{side}-B{batch}.csv" in line, f"{side} B {batch}: {line}")
    case.check("| candidate-dense | 1024 | 64 | ? | ? | ? | ? |" in result.stdout, f"the table: {result.stdout[-600:]}")
    sys.path.insert(0, SCRIPTS)
    import train_torch_reference as reference
    if torch:
        words = torch[0].split()
        try:
            ap, a = reference.parse_args(words[2:words.index("--log")])
            reference.settle_architecture(ap, a, None)
        except SystemExit:  # argparse's error, on stderr
            case.check(False, "the reference refuses the candidate's options")
        else:
            case.check(a.arch.windows[:4] == (256, 256, 256, 0) and a.arch.window_count == 4 and
                       a.arch.value_embeddings and a.arch.smear and a.arch.backout and a.normuon and
                       a.muon_qkv == "head-pairs" and a.weight_decay == 0.1 and a.schedule.momentum_warmup_steps == 300,
                       f"the reference's settings {a}")
    case.end()
    for race_set, want in (("candidate-nanochat-init-adam", {"init": "nanochat", "embedding_lr": 0.3, "head_lr": 0.008,
                                                             "embedding_beta2": 0.995, "head_beta2": 0.96}),
                           ("candidate-head-size-128", {"head_size": 128}), ("candidate-muon-lr-0.04", {"lr": 0.04})):
        case = Case(f"gpu/recipe.sh MODE=race RACE_SET={race_set}: the reference takes the set's options")
        result, _ = gpu_run("gpu/recipe.sh", ["data"], lambda stub: 0,
                            {"MODE": "race", "RACE_SET": race_set, "RACE_BATCHES": "16", "OUT": "logs"})
        words = next((line.split() for line in ran_lines("gpu/recipe.sh") if "train_torch_reference.py" in line), [])
        try:
            ap, a = reference.parse_args(words[2:words.index("--log")])
            reference.settle_architecture(ap, a, None)
        except (SystemExit, ValueError):  # argparse's error, on stderr; no reference run
            case.check(False, f"the reference refuses the options, or did not run: {words}")
        else:
            got = {key: getattr(a, key) for key in want}
            case.check(result.returncode == 0 and got == want, f"exit {result.returncode}, {got}, expected {want}")
        case.end()


def case_gpu_decode_modern():
    case = Case("gpu/decode.sh: a modern d12 beside GPT-2's, each prompt and sample count generated by both")
    result, _ = gpu_run("gpu/decode.sh", [], lambda stub: 0, {"OUT": "logs"})
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}")
    lines = ran_lines("gpu/decode.sh")
    trains = [line for line in lines if line.startswith("train_gpt ") and "--out-dir build/gpu-decode/run" in line]
    case.check(len(trains) == 2 and "--arch modern " in trains[1] and trains[1].endswith("run-modern"),
               f"the models: {trains}")
    generated = [line for line in lines if line.startswith("generate ") and "--max-tokens 256" in line]
    modern = [line for line in generated if "run-modern/model_00000002.bin" in line]
    case.check(len(generated) == 18 and len(modern) == 9, f"{len(generated)} generate runs, {len(modern)} modern")
    case.end()

# A train_gpt of the FP8 script's runs: its path and command line in calls.log in the folder it
# runs from, the repository's (ran.log names both trees' train_gpt alike); what train_gpt prints of them (the MFU and done lines), its --log CSV, and
# the memory check's refusal of a batch above 64 at d24 and 12 at d48 (4 times those with
# --recompute); the FP8 settings' figures as the tables expect them: --fp8 mlp,head 1.3x bf16's
# tokens/s, its delayed scaling 1.2x; final validation losses 3.5 in bf16, 3.51 and 3.55 with FP8.
# With --steps N it sleeps N ms, so that the nowait part's wall times grow with the steps.
FP8_TRAIN_GPT = r"""
echo "$0" "$@" >> calls.log
model=d12 B=4 log= fp8= scaling=current grad=e5m2 recompute=0 steps=0
while [ $# -gt 0 ]; do
    case $1 in
        --model) model=$2; shift ;;
        -B) B=$2; shift ;;
        --log) log=$2; shift ;;
        --fp8) fp8=$2; shift ;;
        --fp8-scaling) scaling=$2; shift ;;
        --fp8-grad) grad=$2; shift ;;
        --steps) steps=$2; shift ;;
        --recompute) recompute=1; shift ;;
    esac
    shift
done
case $model in d24) most=64 ;; d48) most=12 ;; *) most=1024 ;; esac
[ "$recompute" = 1 ] && most=$((most * 4))
if [ "$B" -gt "$most" ]; then
    echo "error: -B $B -T 1024 does not fit in GPU memory: it needs 90.00 GiB (+0.50 GiB reserve), 79.00 GiB are free; try a smaller -B or --recompute gelu,layernorm" >&2
    exit 1
fi
rate=500.0 gflop=0.857 final=3.5 ms=10.0
case $fp8,$scaling,$grad in
    mlp,head,current,e5m2) rate=650.0 gflop=0.7 final=3.51 ms=8.0 ;;
    mlp,head,delayed,e5m2) rate=600.0 gflop=0.7 final=3.55 ms=8.5 ;;
    mlp,head,current,bf16) rate=550.0 gflop=0.8 ;;
    mlp,*) rate=520.0 gflop=0.76 ;;
    head,*) rate=560.0 gflop=0.8 ;;
esac
if [ -n "$fp8" ]; then echo "MFU: $gflop GFLOP per token (those in FP8 counted at half: at twice the peak), peak 989 TFLOP/s"
else echo "MFU: $gflop GFLOP per token, peak 989 TFLOP/s"; fi
echo "step     2/2 | loss 9.000000 | lr 6.000e-04 | norm 1.4000 |    10.0 ms |   500.0K tok/s | MFU  43.3% | mem 20.50 GiB"
echo "done: ${rate}K tokens/s on average after the first step, peak memory in use 20.50 GiB"
[ -z "$log" ] || printf 'step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib\n1,10.8,,6e-05,1.5,900.0,18000.0,0.01,20.5\n2,9.0,5.0,6e-05,1.4,%s,1600000.0,0.5,20.5\n3,8.0,%s,6e-05,1.3,%s,1600000.0,0.5,20.5\n' "$ms" "$final" "$ms" > "$log"
[ "$steps" -gt 0 ] && sleep "$(awk -v n="$steps" 'BEGIN { print n / 1000 }')"
exit 0
"""


def fp8_calls():
    """The command lines of the FP8 script's train_gpt stubs in its last gpu_run."""
    path = os.path.join(gpu_folder("gpu/fp8.sh"), "calls.log")
    return open(path).read().splitlines() if os.path.exists(path) else []


def case_gpu_fp8_refusals():
    out = folder("fp8_out")
    os.makedirs(os.path.join(out, "fp8"))
    open(os.path.join(out, "fp8", "old.log"), "w").close()
    for env_vars, args, must_mention in (({"PARTS": " "}, ["data", "baseline"], "PARTS is empty"),
                                         ({"PARTS": "speed tuning"}, [], "no part called tuning"),
                                         ({"PARTS": "learning"}, ["", "baseline"], "needs the dataset folder"),
                                         ({}, ["data"], "needs BASELINE_DIR"),
                                         ({"PARTS": "nowait"}, ["", "no-such-tree"], "no-such-tree"),
                                         ({"PARTS": "speed", "MODELS": "d12 d13"}, [], "no model called d13"),
                                         ({"PARTS": "speed", "MODELS": " "}, [], "MODELS is empty"),
                                         ({"PARTS": "speed", "FILL_BATCHES": "64 x"}, [], "FILL_BATCHES x"),
                                         ({"PARTS": "speed", "FILL_BATCHES": "512 64"}, [], "FILL_BATCHES 512"),
                                         ({"PARTS": "speed", "STEPS": "0"}, [], "STEPS 0"),
                                         ({"PARTS": "speed", "OUT": out}, [], "holds files already")):
        what = " ".join(f"{k}='{v}'" for k, v in env_vars.items() if k != "OUT") or "every part"
        check_refused(f"gpu/fp8.sh with {what}{', OUT/fp8 not empty' if 'OUT' in env_vars else ''} and "
                      f"{args or 'no folders'}: refused in one line, nothing run", "gpu/fp8.sh", args,
                      dict({"OUT": "logs"}, **env_vars), must_mention)
    case = Case("gpu/fp8.sh with OUT/fp8 not empty: its files left as they were")
    case.check(os.listdir(os.path.join(out, "fp8")) == ["old.log"], f"{os.listdir(os.path.join(out, 'fp8'))}")
    case.end()


def case_gpu_fp8_speed():
    case = Case("gpu/fp8.sh PARTS=speed: d12 at B 16 and 64, d48 at the largest batch the memory check takes for "
                "--fp8 mlp,head, every run; the table's ratios, bars and MFU; the logs packed into one file")
    result, _ = gpu_run("gpu/fp8.sh", [], lambda stub: 0, {"PARTS": "speed", "MODELS": "d12 d48", "OUT": "logs"},
                        stub_bodies={"train_gpt": FP8_TRAIN_GPT})
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stdout[-300:]!r} {result.stderr!r}")
    calls = fp8_calls()
    d12 = [line for line in calls if "--model d12 " in line]
    for B in (16, 64):
        runs = [line for line in d12 if f" -B {B} " in line]
        case.check(len(runs) == 6 and sum("--fp8" not in line for line in runs) == 1, f"d12 B {B}: {runs}")
    d48 = [line for line in calls if "--model d48 " in line]
    batches = [line.split(" -B ")[1].split()[0] for line in d48]
    case.check(batches == ["128", "96", "64", "48", "32", "24", "16"] + ["12"] * 6, f"d48's batches {batches}")
    case.check(all("--fp8 mlp,head --train-data" in line for line in d48[:8]), f"the probe {d48[:8]}")
    for options in ("--fp8 mlp,head --fp8-scaling delayed", "--fp8 mlp ", "--fp8 head ", "--fp8-grad bf16"):
        case.check(sum(options in line for line in d48[8:]) == 1, f"d48: {options!r} in {d48[8:]}")
    for row in ("| d12 | 16 | bf16 | 500.0K | 1.000 | - | 43.3% | 20.50 |",
                "| d12 | 16 | --fp8 mlp,head | 650.0K | 1.300 | ≥ 1.05: yes | 46.0% | 20.50 |",
                "| d12 | 64 | --fp8 mlp,head --fp8-scaling delayed | 600.0K | 1.200 | ≥ 1.05: yes | 42.5% | 20.50 |",
                "| d48 | 12 | --fp8 mlp,head | 650.0K | 1.300 | ≥ 1.25: yes | 46.0% | 20.50 |",
                "| d48 | 12 | --fp8 mlp,head --fp8-scaling delayed | 600.0K | 1.200 | ≥ 1.25: NO | 42.5% | 20.50 |",
                "| d48 | 12 | --fp8 mlp | 520.0K | 1.040 | - | 40.0% | 20.50 |",
                "| d48 | 12 | --fp8 mlp,head --fp8-grad bf16 | 550.0K | 1.100 | - | 44.5% | 20.50 |"):
        case.check(row in result.stdout, f"no row {row!r} in {result.stdout[-1500:]!r}")
    logs = os.path.join(gpu_folder("gpu/fp8.sh"), "logs")
    case.check(sorted(os.listdir(logs)) == ["fp8-logs.tar.gz", "fp8-tables.md"], f"OUT holds {os.listdir(logs)}")
    tables = open(os.path.join(logs, "fp8-tables.md")).read()
    case.check("| d48 | 12 | --fp8 mlp,head | 650.0K |" in tables and "twice the bf16 peak" in tables,
               f"the tables' file: {tables[:300]!r}")
    case.end()
    case = Case("gpu/fp8.sh PARTS=speed, no batch of FILL_BATCHES fits: the same with --recompute gelu,layernorm")
    result, _ = gpu_run("gpu/fp8.sh", [], lambda stub: 0,
                        {"PARTS": "speed", "MODELS": "d48", "FILL_BATCHES": "64 32", "OUT": "logs"},
                        stub_bodies={"train_gpt": FP8_TRAIN_GPT})
    calls = fp8_calls()
    case.check(result.returncode == 0 and len(calls) == 9, f"exit {result.returncode}, {calls}")
    case.check([("--recompute gelu,layernorm" in line, line.split(" -B ")[1].split()[0]) for line in calls] ==
               [(False, "64"), (False, "32"), (True, "64")] + [(True, "32")] * 6, f"the runs {calls}")
    case.check("| d48 | 32 (recompute) | bf16 | 500.0K | 1.000 |" in result.stdout, f"{result.stdout[-800:]!r}")
    case.end()


def case_gpu_fp8_learning():
    case = Case("gpu/fp8.sh PARTS=learning MODELS=d12: both recipes in bf16, --fp8 mlp,head and its delayed "
                "scaling, seed 1, one epoch each; the table of FP8 minus bf16 against 0.02 nats")
    result, _ = gpu_run("gpu/fp8.sh", ["data"], lambda stub: 0, {"PARTS": "learning", "MODELS": "d12", "OUT": "logs"},
                        stub_bodies={"train_gpt": FP8_TRAIN_GPT})
    case.check(result.returncode == 0 and "6 runs each; estimate about " in result.stdout,
               f"exit {result.returncode}: {result.stdout[:400]!r} {result.stderr!r}")
    runs = fp8_calls()
    case.check(len(runs) == 6 and all("--model d12 " in line and "-B 16 " in line and "--seed 1 " in line and
                                      "--val-data data/val_*.bin" in line for line in runs), f"the runs {runs}")
    gpt2 = [line for line in runs if "--optimizer adamw --lr 6e-4 --weight-decay 0.1" in line]
    modern = [line for line in runs if "--arch modern --optimizer muon" in line]
    case.check(len(gpt2) == 3 and len(modern) == 3, f"the recipes {runs}")
    for line in runs:
        steps = line.split(" --steps ")[1].split()[0]
        case.check(steps == runs[0].split(" --steps ")[1].split()[0], f"the same steps: {line}")
    for row in ("| d12 | gpt2-adamw | bf16 | 10.8000 | 3.5000 | - | - | 10.0 | 1.000 |",
                "| d12 | gpt2-adamw | fp8 | 10.8000 | 3.5100 | +0.0100 | yes | 8.0 | 0.800 |",
                "| d12 | modern-muon | fp8-delayed | 10.8000 | 3.5500 | +0.0500 | NO | 8.5 | 0.850 |"):
        case.check(row in result.stdout, f"no row {row!r} in {result.stdout[-1500:]!r}")
    case.end()


def case_gpu_fp8_nowait():
    case = Case("gpu/fp8.sh PARTS=nowait: the baseline built; d12 at B 16 and 64, both recipes, this tree, the "
                "baseline and this tree again, N1 and N2 steps each; the table of wall ms per step")
    result, _ = gpu_run("gpu/fp8.sh", ["", "baseline"], lambda stub: 0, {"PARTS": "nowait", "OUT": "logs"},
                        stub_bodies={"train_gpt": FP8_TRAIN_GPT, "baseline/train_gpt": FP8_TRAIN_GPT})
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stdout[-400:]!r} {result.stderr!r}")
    case.check("make -C baseline" in " ".join(ran_lines("gpu/fp8.sh")), "the baseline not built")
    calls = fp8_calls()
    this = [line for line in calls if line.startswith("./train_gpt ")]
    base = [line for line in calls if line.startswith("baseline/train_gpt ")]
    case.check(len(this) == 17 and len(base) == 8, f"{len(this)} runs of this tree, {len(base)} of the baseline")
    for B, steps in ((16, ("20", "420")), (64, ("10", "110"))):
        for recipe, has_arch in (("gpt2", False), ("modern", True)):
            runs = [line for line in base if f" -B {B} " in line and ("--arch modern" in line) == has_arch]
            case.check([line.split(" --steps ")[1].split()[0] for line in runs] == list(steps),
                       f"the baseline, {recipe} B {B}: {runs}")
    rows = [line for line in result.stdout.splitlines() if line.startswith(("| gpt2-adamw |", "| modern-muon |"))]
    case.check(len(rows) == 4 and all(len([c for c in row.split("|")[3:6] if c.strip() != "-"]) == 3 for row in rows),
               f"the rows {rows}")
    case.end()


TEST_GPT = r"""
printf 'PASS gpt sampler\nPASS gpt resume bit-exact fp8 mlp,head delayed\nFAIL gpt reports a step late: step 3\n'
printf '    loss bf16 5.0 -> 2.0, fp8 5.0 -> 2.01\n'
exit 1
"""
SANITIZER = r"""
case "$*" in *test_batches*) echo "========= ERROR SUMMARY: 2 errors"; exit 99 ;; esac
exit 124
"""


def case_gpu_fp8_tests():
    case = Case("gpu/fp8.sh PARTS='test matmuls': the tests, memcheck's errors failed and its time-out reported; "
                "test_gpt's FP8 and late-report lines; bench_matmul's and bench_fp8_algorithms' tables")
    result, _ = gpu_run("gpu/fp8.sh", [], lambda stub: 0, {"PARTS": "test matmuls", "OUT": "logs"},
                        stub_bodies={"build/tests/unit/gpt/test_gpt": TEST_GPT, "bin/compute-sanitizer": SANITIZER,
                                     "build/bench/bench_matmul": "echo '| 768 | 16384 | mlp up 768→3072 | bf16 |'",
                                     "build/bench/bench_fp8_algorithms": "echo '| fp8 768 -> 3072, N 16384 | 0 |'"})
    out = result.stdout
    last = (out.splitlines() or [""])[-1]
    case.check(result.returncode == 1 and last == "failed steps: test: test_gpt, test: test_batches under memcheck",
               f"exit {result.returncode}, last line {last!r}")
    for want in ("test_fp8 under memcheck: timed out", "PASS gpt resume bit-exact fp8 mlp,head delayed",
                 "FAIL gpt reports a step late: step 3", "    loss bf16 5.0 -> 2.0", "test_gpt: 2 passed, 1 failed",
                 "test_batches under memcheck: ========= ERROR SUMMARY: 2 errors", "| 768 | 16384 | mlp up 768→3072 |",
                 "| fp8 768 -> 3072, N 16384 | 0 |"):
        case.check(want in out, f"no {want!r} in {out[-1500:]!r}")
    case.check("gpt sampler" not in out, "test_gpt's other lines printed")
    case.end()


def main():
    case_random_tokens()
    case_gen_unicode_tables()
    case_compare_curves()
    case_without_numpy()
    case_help_without_packages()
    case_missing_packages()
    case_reference_bad_counts()
    case_torch_scripts()
    case_architecture_options()
    case_gpu_scripts()
    case_gpu_parity_variables()
    case_gpu_parity_architecture()
    case_gpu_modern_parts()
    case_gpu_masks_runs()
    case_gpu_recipe_runs()
    case_gpu_decode_modern()
    case_gpu_fp8_refusals()
    case_gpu_fp8_speed()
    case_gpu_fp8_learning()
    case_gpu_fp8_nowait()
    case_gpu_fp8_tests()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
