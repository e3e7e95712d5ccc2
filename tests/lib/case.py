"""tests/lib/case.py: the named test case of the Python tests, printing PASS / FAIL lines like
tests/lib/test.h, and how they run a script: with this interpreter, bounded in time and memory."""
import os
import resource
import subprocess
import sys


class Case:
    """One named case: PASS when no check failed, else FAIL with every failed check."""
    failures = 0  # cases failed so far in this process: the test's exit status

    def __init__(self, name):
        self.name, self.failed = name, []

    def check(self, cond, why):
        if not cond:
            self.failed.append(why)
        return cond

    def end(self):
        if self.failed:
            Case.failures += 1
            print(f"FAIL {self.name}: " + "\n    also: ".join(self.failed))
        else:
            print(f"PASS {self.name}")
        sys.stdout.flush()


MEMORY_LIMIT = 4 << 30  # address space: a script gone wrong fails its case, not the machine


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_script(script, *args, limit_s=120, env=None, **kwargs):
    """Runs the Python script with this interpreter under limit_s seconds and MEMORY_LIMIT, text
    output captured. Returns the CompletedProcess; one that ran out of time has returncode None
    and says so on stderr. env: variables to set on top of this process's."""
    # One BLAS thread: the buffers of one per core would count against the limit on a large machine.
    full_env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **(env or {}))
    cmd = [sys.executable, script, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, env=full_env,
                              preexec_fn=limit_memory, **kwargs)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        return subprocess.CompletedProcess(cmd, None, out, f"timed out after {limit_s} s")
