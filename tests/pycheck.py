"""check() of the Python tests: counts the checks that passed and failed and prints each failure."""
import sys


class Checks:
    def __init__(self, stream=sys.stdout):
        self.passed = self.failed = 0
        self.stream = stream

    def __call__(self, cond, msg):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {msg}", file=self.stream)

    def summary(self, name=""):
        """Prints "[NAME: ]P passed, F failed"; the exit status (1 when any failed)."""
        print(f"{name + ': ' if name else ''}{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0
