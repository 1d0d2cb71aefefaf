"""Writes tests/ for max-rectangle (run from this directory; deterministic)."""

import random
import subprocess
import sys
from pathlib import Path

rng = random.Random(2025)


def grid(n, m, low=-1000, high=1000):
    return [[rng.randint(low, high) for _ in range(m)] for _ in range(n)]


cases = {
    1: [grid(1, 1), grid(1, 7, -9, -1), grid(1, 50), grid(1, 20000), grid(1, 20000, -1000, 300)],
    2: [grid(3, 4), grid(5, 5, -9, -1), grid(30, 30), grid(100, 100), grid(100, 100, -1000, 200), grid(100, 1)],
}
Path("tests").mkdir(exist_ok=True)
for group, grids in cases.items():
    for number, rows in enumerate(grids, 1):
        text = f"{len(rows)} {len(rows[0])}\n" + "".join(" ".join(map(str, row)) + "\n" for row in rows)
        answer = subprocess.run([sys.executable, "solutions/bands.py"], input=text, text=True, capture_output=True)
        if len(rows) * len(rows[0]) <= 2500:  # cross-check the small ones by brute force
            brute = subprocess.run([sys.executable, "solutions/brute.py"], input=text, text=True, capture_output=True)
            assert brute.stdout == answer.stdout, (group, number)
        Path(f"tests/{group}-{number:02d}.in").write_text(text)
        Path(f"tests/{group}-{number:02d}.out").write_text(answer.stdout)
