#!/usr/bin/env python3
"""tests/programs/test_output_file.py: how the scripts write their outputs (scripts/output_file.py, the
rules of common/atomic_file.h), through the scripts that write: import_gpt2.py (a checkpoint),
plot_log.py (an SVG), export_hf.py (a folder), random_tokens.py (a shard while a signal comes).

An output that is one of the inputs (by name, through a link, a hard link) is refused and the
input kept; a link at the output is followed (its target replaced, the link kept; a dangling
one creates its target); a FIFO, and a deleted file through /proc/self/fd, are written in place;
a directory, a missing path ending in '/', an empty name (the message names it, not ': ...') and
(for a folder) the current folder are refused; a
link or a folder at OUTPUT.tmp is neither written through nor removed; the new file gets the permissions of a new
file (0666 less the umask); SIGINT or SIGTERM during a write leaves the old file and no
temporary, even when it comes as the temporary is made. Each case works in a folder of its own under $FLASHGPT_TMP; prints PASS / FAIL lines
like tests/lib/test.h.
"""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from case import Case, limit_memory, run_script  # noqa: E402
from test_export_hf import random_checkpoint, run_exporter  # noqa: E402
from test_import_gpt2 import TMP, make_checkpoint, run_importer  # noqa: E402
from test_plot_log import HEADER, line  # noqa: E402
from test_plot_log import run as run_plotter  # noqa: E402

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
CHECKPOINT_MAGIC = (20240326).to_bytes(4, "little")
RNG = np.random.default_rng(7)


def folder(name):
    """A new empty folder for one case."""
    path = os.path.join(TMP, "output_" + name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def listing(path):
    """name -> what it is, for every entry of the folder."""
    def kind(p):
        if os.path.islink(p):
            return "link to " + os.readlink(p)
        return "folder" if os.path.isdir(p) else "fifo" if os.path.exists(p) and not os.path.isfile(p) else "file"
    return {n: kind(os.path.join(path, n)) for n in sorted(os.listdir(path))}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def refused(case, result, must_mention):
    case.check(result.returncode not in (0, None), f"exit status {result.returncode}")
    case.check(len(result.stderr.splitlines()) == 1, f"want one line on stderr, got {result.stderr!r}")
    case.check(must_mention in result.stderr, f"message {result.stderr.strip()!r} lacks {must_mention!r}")


def succeeded(case, result):
    return case.check(result.returncode == 0 and result.stderr == "",
                      f"exit {result.returncode}: {result.stderr.strip()!r}")


def is_checkpoint(path):
    return os.path.isfile(path) and read(path)[:4] == CHECKPOINT_MAGIC


def hf_folder(d):
    """A fake Hugging Face folder inside d (test_import_gpt2's tiny GPT-2)."""
    hf, _ = make_checkpoint(os.path.relpath(os.path.join(d, "hf"), TMP), RNG)
    return hf


def case_import_onto_input(name, make_output, must_mention="is the input"):
    """make_output(d, hf) -> the output path, which names an input: refused, the inputs kept."""
    case = Case(name)
    d = folder(name.split(":")[0].replace(" ", "_"))
    hf = hf_folder(d)
    out = make_output(d, hf)
    before = {n: read(os.path.join(hf, n)) for n in os.listdir(hf)}
    entries = listing(d)
    refused(case, run_importer(hf, out), must_mention)
    after = {n: read(os.path.join(hf, n)) for n in os.listdir(hf)}
    case.check(after == before, f"{hf} changed: {sorted(set(before) ^ set(after)) or 'contents'}")
    case.check(listing(d) == entries, f"{d} held {entries}, now {listing(d)}")
    case.end()


def case_import_tmp_taken(kind):
    """OUT.bin.tmp already exists as a link to another file, or a folder: neither is written
    through nor removed, and OUT.bin is written."""
    case = Case(f"import: OUT.bin.tmp a {kind} is left alone")
    d = folder(f"tmp_{kind}")
    hf = hf_folder(d)
    out = os.path.join(d, "o.bin")
    victim = os.path.join(d, "victim.txt")
    write(victim, b"mine")
    if kind == "link":
        os.symlink("victim.txt", out + ".tmp")
    else:
        os.makedirs(out + ".tmp")
    if succeeded(case, run_importer(hf, out)):
        case.check(is_checkpoint(out), "o.bin is not a checkpoint")
    case.check(read(victim) == b"mine", "victim.txt was written")
    want = {"hf": "folder", "o.bin": "file", "o.bin.tmp": "link to victim.txt" if kind == "link" else "folder",
            "victim.txt": "file"}
    case.check(listing(d) == want, f"folder holds {listing(d)}, expected {want}")
    case.end()


def case_import_through_link(dangling):
    case = Case(f"import: a {'dangling ' if dangling else ''}link at the output is followed, the link kept")
    d = folder("link_dangling" if dangling else "link")
    hf = hf_folder(d)
    target = os.path.join(d, "real.bin")
    if not dangling:
        write(target, b"old")
    os.symlink("real.bin", os.path.join(d, "o.bin"))
    if succeeded(case, run_importer(hf, os.path.join(d, "o.bin"))):
        case.check(is_checkpoint(target), "real.bin is not the new checkpoint")
    want = {"hf": "folder", "o.bin": "link to real.bin", "real.bin": "file"}
    case.check(listing(d) == want, f"folder holds {listing(d)}, expected {want}")
    case.end()


def case_import_mode():
    case = Case("import: the checkpoint gets a new file's permissions (0666 less the umask)")
    d = folder("mode")
    out = os.path.join(d, "o.bin")
    mask = os.umask(0o022)
    try:
        if succeeded(case, run_importer(hf_folder(d), out)):
            mode = os.stat(out).st_mode & 0o777
            case.check(mode == 0o644, f"mode {oct(mode)}, expected 0o644 under umask 022")
    finally:
        os.umask(mask)
    case.end()


def case_import_failed_write():
    """A tensor missing near the end: the write stops, nothing is left in the folder."""
    case = Case("import: a failed write leaves no output and no temporary")
    d = folder("failed")
    hf, _ = make_checkpoint(os.path.relpath(os.path.join(d, "hf"), TMP), RNG,
                            edit=lambda tensors, dtypes: tensors.pop("ln_f.bias"))
    refused(case, run_importer(hf, os.path.join(d, "o.bin")), "ln_f.bias")
    case.check(listing(d) == {"hf": "folder"}, f"folder holds {listing(d)}")
    case.end()


def log_text():
    return HEADER + "".join(line(s, 10 - s) for s in range(1, 5))


def case_plot_onto_log(how):
    case = Case(f"plot: the output is the log {how}: refused, the log kept")
    d = folder(f"plot_onto_log_{how.split()[-1]}")
    log = os.path.join(d, "log.csv")
    write(log, log_text().encode())
    out = log
    if how == "through a link":
        out = os.path.join(d, "log.svg")
        os.symlink("log.csv", out)
    elif how == "by a hard link":
        out = os.path.join(d, "log.svg")
        os.link(log, out)
    entries = listing(d)
    refused(case, run_plotter(log, out), "is the input")
    case.check(read(log) == log_text().encode(), "the log changed")
    case.check(listing(d) == entries, f"folder held {entries}, now {listing(d)}")
    case.end()


def case_plot_tmp_link():
    case = Case("plot: OUT.svg.tmp a link to another file is left alone")
    d = folder("plot_tmp_link")
    log, out, victim = (os.path.join(d, n) for n in ("log.csv", "log.svg", "victim.txt"))
    write(log, log_text().encode())
    write(victim, b"mine")
    os.symlink("victim.txt", out + ".tmp")
    if succeeded(case, run_plotter(log, out)):
        case.check(read(out).startswith(b"<svg"), "log.svg is not the SVG")
    case.check(read(victim) == b"mine", "victim.txt was written")
    case.check(listing(d).get("log.svg.tmp") == "link to victim.txt", f"folder holds {listing(d)}")
    case.end()


def case_plot_fifo():
    """A FIFO at the output is written in place, not renamed over; the reader gets the SVG."""
    case = Case("plot: a FIFO at the output is written in place")
    d = folder("plot_fifo")
    log, out = os.path.join(d, "log.csv"), os.path.join(d, "log.svg")
    write(log, log_text().encode())
    os.mkfifo(out)
    got = []
    reader = threading.Thread(target=lambda: got.append(read(out)), daemon=True)
    reader.start()
    result = run_plotter(log, out)
    reader.join(timeout=30)
    succeeded(case, result)
    case.check(got and got[0].startswith(b"<svg"), f"the reader got {got[0][:20] if got else 'nothing'}")
    case.check(listing(d) == {"log.csv": "file", "log.svg": "fifo"}, f"folder holds {listing(d)}")
    case.end()


def case_plot_directory():
    case = Case("plot: a directory at the output is refused")
    d = folder("plot_dir")
    log = os.path.join(d, "log.csv")
    write(log, log_text().encode())
    os.makedirs(os.path.join(d, "log.svg"))
    refused(case, run_plotter(log, os.path.join(d, "log.svg")), "is a directory")
    case.check(listing(d) == {"log.csv": "file", "log.svg": "folder"}, f"folder holds {listing(d)}")
    case.end()


def case_plot_deleted_file():
    """/proc/self/fd/N on a file already deleted: written in place through the descriptor, no
    file made at the name the link shows ("... (deleted)")."""
    case = Case("plot: /proc/self/fd/N on a deleted file is written in place")
    d = folder("plot_deleted")
    log, out = os.path.join(d, "log.csv"), os.path.join(d, "gone.svg")
    write(log, log_text().encode())
    fd = os.open(out, os.O_RDWR | os.O_CREAT, 0o644)
    os.remove(out)
    try:
        succeeded(case, run_plotter(log, f"/proc/self/fd/{fd}", pass_fds=[fd]))
        os.lseek(fd, 0, os.SEEK_SET)
        case.check(os.read(fd, 4) == b"<svg", "the SVG did not come through the descriptor")
    finally:
        os.close(fd)
    case.check(listing(d) == {"log.csv": "file"}, f"folder holds {listing(d)}")
    case.end()


def case_plot_trailing_slash():
    case = Case("plot: a missing output whose name ends in '/' is refused")
    d = folder("plot_slash")
    log = os.path.join(d, "log.csv")
    write(log, log_text().encode())
    refused(case, run_plotter(log, os.path.join(d, "new") + "/"), "ends in '/'")
    case.check(listing(d) == {"log.csv": "file"}, f"folder holds {listing(d)}")
    case.end()


def case_empty_output_name():
    """An empty output name, run in a folder of the inputs: one line naming what is empty, the
    folder (which '' would resolve to) left as it was."""
    d = folder("empty_name")
    hf = hf_folder(d)
    ckpt = os.path.join(d, "model.bin")
    random_checkpoint(ckpt, RNG, bf16=True)
    log = os.path.join(d, "log.csv")
    write(log, log_text().encode())
    entries = listing(d)
    for name, result, must_mention in (
            ("import_gpt2.py HF_DIR ''", run_importer(hf, "", cwd=d), "an empty name among HF_DIR and OUT.bin"),
            ("import_gpt2.py '' OUT.bin", run_importer("", "o.bin", cwd=d), "an empty name among HF_DIR and OUT.bin"),
            ("export_hf.py CHECKPOINT ''", run_exporter(ckpt, "", cwd=d), "an empty name among CHECKPOINT.bin"),
            ("plot_log.py LOG ''", run_plotter(log, "", cwd=d), "error: '': empty path"),
            ("random_tokens.py '' 10", run_script(os.path.join(SCRIPTS, "random_tokens.py"), "", "10", cwd=d),
             "error: '': empty path")):
        case = Case(f"{name}: refused in one line naming the empty name")
        refused(case, result, must_mention)
        case.check(listing(d) == entries, f"{d} held {entries}, now {listing(d)}")
        case.end()


def case_export_current_folder():
    case = Case("export: the current folder, empty, is refused as OUT_DIR")
    d = folder("export_cwd")
    ckpt = os.path.join(TMP, "export_cwd_model.bin")
    random_checkpoint(ckpt, RNG, bf16=True)
    refused(case, run_exporter(ckpt, ".", cwd=d), "current folder")
    case.check(os.path.isdir(d) and not os.listdir(d), f"{d} changed")
    case.end()


def case_export_through_link():
    case = Case("export: a link to an empty folder at OUT_DIR is followed, the link kept")
    d = folder("export_link")
    ckpt = os.path.join(d, "model.bin")
    random_checkpoint(ckpt, RNG, bf16=True)
    os.makedirs(os.path.join(d, "real_hf"))
    os.symlink("real_hf", os.path.join(d, "hf"))
    result = run_exporter(ckpt, os.path.join(d, "hf"))
    if case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()!r}"):
        files = sorted(os.listdir(os.path.join(d, "real_hf")))
        case.check(files == ["config.json", "model.safetensors"], f"real_hf holds {files}")
    want = {"hf": "link to real_hf", "model.bin": "file", "real_hf": "folder"}
    case.check(listing(d) == want, f"folder holds {listing(d)}, expected {want}")
    case.end()


def signals_as_in_a_terminal():
    """In the child: SIGINT and SIGTERM as a terminal's program has them, whatever this test
    inherited (a shell ignores SIGINT for the jobs it puts in the background); memory bounded."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    limit_memory()


def case_signal(sig):
    """random_tokens.py writing a large shard over an existing file when sig comes: exit status
    128 + sig, the old file as it was, no temporary left."""
    case = Case(f"random_tokens: {signal.Signals(sig).name} during the write keeps the old file")
    d = folder(f"signal_{sig}")
    out = os.path.join(d, "shard.bin")
    write(out, b"old")
    proc = subprocess.Popen([sys.executable, os.path.join(SCRIPTS, "random_tokens.py"), out, str(2 ** 31 - 1)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=signals_as_in_a_terminal)
    deadline = time.monotonic() + 30
    while len(os.listdir(d)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    writing = case.check(len(os.listdir(d)) == 2, f"no temporary appeared: {listing(d)}")
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    if writing:
        case.check(proc.returncode == 128 + sig, f"exit status {proc.returncode}, expected {128 + sig}")
        case.check("Traceback" not in err, f"stderr: {err.strip()[-200:]!r}")
    case.check(read(out) == b"old", "the old file changed")
    case.check(listing(d) == {"shard.bin": "file"}, f"folder holds {listing(d)}")
    case.end()


# A child that writes with output_file, the signal raised right after the temporary is made (in
# place of tempfile's MAKER), before output_file has its name.
SIGNAL_AS_MADE = """
import os, signal, sys, tempfile
sys.path.insert(0, sys.argv[1])
import output_file
maker = getattr(tempfile, sys.argv[2])
def make_then_signal(*args, **kwargs):
    made = maker(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)
    return made
setattr(tempfile, sys.argv[2], make_then_signal)
if sys.argv[2] == "mkstemp":
    with output_file.atomic_output(sys.argv[3]) as f:
        f.write(b"new")
else:
    with output_file.atomic_folder(sys.argv[3]) as d:
        open(os.path.join(d, "new"), "w").close()
"""


def case_signal_as_made(maker):
    """SIGTERM as the temporary (mkstemp: a file's, mkdtemp: a folder's) is made: exit status
    143, the old file kept (no folder made), no temporary left."""
    case = Case(f"SIGTERM as {maker} makes the temporary: none left")
    d = folder("signal_as_" + maker)
    out = os.path.join(d, "out")
    if maker == "mkstemp":
        write(out, b"old")
    result = subprocess.run([sys.executable, "-c", SIGNAL_AS_MADE, SCRIPTS, maker, out], capture_output=True, text=True,
                            preexec_fn=signals_as_in_a_terminal, timeout=60)
    case.check(result.returncode == 128 + signal.SIGTERM, f"exit status {result.returncode}: {result.stderr[-200:]!r}")
    want = {"out": "file"} if maker == "mkstemp" else {}
    case.check(listing(d) == want, f"folder holds {listing(d)}, expected {want}")
    if maker == "mkstemp":
        case.check(read(out) == b"old", "the old file changed")
    case.end()


def main():
    case_import_onto_input("import onto its model.safetensors: refused",
                           lambda d, hf: os.path.join(hf, "model.safetensors"))
    case_import_onto_input("import onto config.json through a link: refused",
                           lambda d, hf: os.symlink(os.path.join("hf", "config.json"), os.path.join(d, "o.bin"))
                           or os.path.join(d, "o.bin"))
    case_import_onto_input("import onto a hard link of model.safetensors: refused",
                           lambda d, hf: os.link(os.path.join(hf, "model.safetensors"), os.path.join(d, "o.bin"))
                           or os.path.join(d, "o.bin"))
    case_import_onto_input("import onto a directory: refused",
                           lambda d, hf: os.makedirs(os.path.join(d, "o.bin")) or os.path.join(d, "o.bin"),
                           must_mention="is a directory")
    case_import_tmp_taken("link")
    case_import_tmp_taken("folder")
    case_import_through_link(dangling=False)
    case_import_through_link(dangling=True)
    case_import_mode()
    case_import_failed_write()
    case_plot_onto_log("by name")
    case_plot_onto_log("through a link")
    case_plot_onto_log("by a hard link")
    case_plot_tmp_link()
    case_plot_fifo()
    case_plot_directory()
    case_plot_deleted_file()
    case_plot_trailing_slash()
    case_export_through_link()
    case_export_current_folder()
    case_empty_output_name()
    case_signal(signal.SIGTERM)
    case_signal(signal.SIGINT)
    case_signal_as_made("mkstemp")
    case_signal_as_made("mkdtemp")
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
