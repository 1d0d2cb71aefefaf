"""Writes tests/ for knapsack-ratio (run from this directory; deterministic). Expected
outputs are optimal choices from solutions/dp.py (cross-checked by brute force when small)."""

import random
import subprocess
import sys
from pathlib import Path

rng = random.Random(2025)


def case(n, capacity, low=1, high=1000):
    items = [(rng.randint(low, high), rng.randint(low, high)) for _ in range(n)]
    return f"{n} {capacity}\n" + "".join(f"{w} {v}\n" for w, v in items)


def value(text, output):
    numbers = list(map(int, text.split()))
    picked = list(map(int, output.split()[1:]))
    return sum(numbers[3 + 2 * (i - 1)] for i in picked)


def run(solution, text):
    return subprocess.run([sys.executable, solution], input=text, text=True, capture_output=True, check=True).stdout


# value per weight misleads a greedy: the densest item blocks the two that fill the knapsack
GREEDY_TRAP_1 = "3 998\n500 500\n499 450\n499 450\n"
GREEDY_TRAP_2 = "4 1998\n1000 1000\n999 900\n999 900\n7 1\n"
cases = {
    1: [case(1, 1000), case(5, 10, 1, 9), case(10, 1000), case(10, 300), case(8, 2000), GREEDY_TRAP_1],
    2: [case(100, 10000), case(100, 2500), case(60, 10000, 100, 1000), case(100, 10000, 1, 200), GREEDY_TRAP_2],
}
Path("tests").mkdir(exist_ok=True)
for group, texts in cases.items():
    for number, text in enumerate(texts, 1):
        answer = run("solutions/dp.py", text)
        if group == 1:
            assert value(text, run("solutions/brute.py", text)) == value(text, answer), number
        Path(f"tests/{group}-{number:02d}.in").write_text(text)
        Path(f"tests/{group}-{number:02d}.out").write_text(answer)
