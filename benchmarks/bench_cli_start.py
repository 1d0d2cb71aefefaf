"""How long the ``cascade`` commands that need no model take to start (issue 42, item 9: under
1 s), against the start every command paid when the heavy libraries came with the CLI.

    .venv/bin/python benchmarks/bench_cli_start.py [--repeats 5]

Each command runs ``--repeats`` times in a fresh process (``python -m cascade_rl.cli ...``, from
the checkout's root); the median wall time and the median CPU time of the process (user +
system, which a busy shared machine inflates less than wall time) are printed. The baseline, in
the same run: a process that imports what a light command used to import before it could answer
(``torch`` and ``transformers``, through the toy world's package). The ratio is command / baseline
CPU time. The CPU model and the load average are printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "cascade --help": ["--help"],
    "cascade data formats": ["data", "formats"],
    "cascade data decontaminate (README example)": [
        "data",
        "decontaminate",
        "tests/data/samples/nemo_gym_math.jsonl",
        "-o",
        "{out}",
        "--overwrite",
        "-q",
        "-b",
        "aime24=tests/data/samples/aime2024.jsonl",
    ],
    "cascade score --help": ["score", "--help"],
    "cascade score (3 math lines)": ["score", "{math}", "-o", "{out}"],
    "cascade run recipes/tiny.yaml --dry-run": ["run", "recipes/tiny.yaml", "--dry-run"],
}
BASELINE = [sys.executable, "-c", "import torch, transformers"]
TARGET_S = 1.0


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one process (a command that fails stops the benchmark)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: a command that ran and reported problems (none here)
        sys.exit(f"{' '.join(argv[3:])} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def medians(argv: list[str], repeats: int) -> tuple[float, float]:
    runs = [timed(argv) for _ in range(repeats)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / "bench_cli_start"
    scratch.mkdir(parents=True, exist_ok=True)
    math = scratch / "math.jsonl"
    math.write_text(
        "".join(f'{{"domain": "math", "response": "\\\\boxed{{{n}}}", "answer": "{n}"}}\n' for n in range(3))
    )
    print(f"{cpu_model()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start")
    base_wall, base_cpu = medians(BASELINE, args.repeats)
    print(f"baseline (import torch, transformers): {base_wall:.2f} s wall, {base_cpu:.2f} s CPU")
    worst = 0.0
    for name, words in COMMANDS.items():
        words = [word.format(math=math, out=scratch / f"{words[0]}.jsonl") for word in words]
        argv = [sys.executable, "-m", "cascade_rl.cli", *words]
        wall, cpu = medians(argv, args.repeats)
        worst = max(worst, cpu)
        print(f"{name:42s} {wall:5.2f} s wall, {cpu:5.2f} s CPU  ({cpu / base_cpu:.2f}x the baseline's CPU)")
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} at the end; slowest command {worst:.2f} s CPU (target < {TARGET_S} s)")


if __name__ == "__main__":
    main()
