"""tests/case.py: the named test case of the Python tests, printing PASS / FAIL lines like
tests/test.h."""
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
