"""The verifier's test: run from the task's working directory, where calc.py is."""

import os
import sys

sys.path.insert(0, os.getcwd())

from calc import add  # noqa: E402

assert add(2, 3) == 5, f"add(2, 3) is {add(2, 3)}, not 5"
assert add(-1, 1) == 0
print("add works")
