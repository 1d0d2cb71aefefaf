"""Writes tests/ for digit-sum (run from this directory; deterministic)."""

import random
import runpy
from pathlib import Path

total = runpy.run_path("solutions/positional.py", run_name="lib")["digit_sum_total"]
rng = random.Random(2025)
cases = {
    1: [1, 9, 10, 99, 12345, 100000, rng.randint(1, 100000)],
    2: [10**18, 10**18 - 1, 987654321987654321, rng.randint(10**6, 10**18), rng.randint(10**12, 10**15)],
}
assert all(total(n) == sum(sum(map(int, str(x))) for x in range(1, n + 1)) for n in cases[1])
Path("tests").mkdir(exist_ok=True)
for group, values in cases.items():
    for number, n in enumerate(values, 1):
        Path(f"tests/{group}-{number:02d}.in").write_text(f"{n}\n")
        Path(f"tests/{group}-{number:02d}.out").write_text(f"{total(n)}\n")
