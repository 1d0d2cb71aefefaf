"""Benchmark n-gram decontamination (SPEC section 3; ``cascade data decontaminate``):
:class:`cascade_rl.data.hygiene.NgramIndex` against the naive baseline, a Python set of word
9-gram tuples of the benchmark texts probed with every 9-gram tuple of each training text.

    .venv/bin/python benchmarks/bench_data.py [--rows 100000] [--benchmarks 3000] [--seed 0]

Data, deterministic: a Zipf-distributed vocabulary of 30,000 words; ``--rows`` training texts of
40-400 words and ``--benchmarks`` benchmark questions of 30-150 words in three named benchmarks;
2% of the training texts carry a copied span of 9-20 benchmark words (contaminated), another 2%
an 8-word span (a near miss that must be kept). Each method runs in its own process (so that the
peak resident memory, ``ru_maxrss``, is its own), over the same texts, in chunks of 2,048 rows as
the command reads them; both must flag exactly the same rows (the benchmark exits 1 otherwise).
Prints rows/s of each, the ratio (target >= 3x) and the peak memory of each process above the
memory of a process that only builds the data; then the whole command, ``cascade data
decontaminate`` on the same rows as JSONL (reading, writing, summary), in rows/s.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 3.0
CHUNK = 2048


def make_data(rows: int, benchmarks: int, seed: int) -> tuple[list[str], dict[str, list[str]]]:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(30_000)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]

    def text(low: int, high: int) -> list[str]:
        return rng.choices(vocabulary, weights=weights, k=rng.randint(low, high))

    tests = [text(30, 150) for _ in range(benchmarks)]
    named = {name: [" ".join(t) for t in tests[i::3]] for i, name in enumerate(("aime", "gpqa", "lcb"))}
    train = []
    for _ in range(rows):
        words = text(40, 400)
        roll = rng.random()
        if roll < 0.04:
            source = rng.choice(tests)
            length = rng.randint(9, 20) if roll < 0.02 else 8
            start = rng.randint(0, len(source) - length)
            at = rng.randint(0, len(words))
            words[at:at] = source[start : start + length]
        train.append(" ".join(words))
    return train, named


def run_naive(train: list[str], named: dict[str, list[str]]) -> list[bool]:
    from cascade_rl.data.hygiene import ngram_index, ngrams

    index = ngram_index([t for texts in named.values() for t in texts], 9)
    return [any(gram in index for gram in ngrams(t, 9)) for t in train]


def run_index(train: list[str], named: dict[str, list[str]]) -> list[bool]:
    from cascade_rl.data.hygiene import NgramIndex

    index = NgramIndex(9)
    for name, texts in named.items():
        index.add(name, texts)
    flags: list[bool] = []
    for start in range(0, len(train), CHUNK):
        flags += [bool(hits) for hits in index.matches(train[start : start + CHUNK])]
    return flags


def child(method: str, rows: int, benchmarks: int, seed: int) -> None:
    """One measurement in this process: prints JSON (seconds, peak KiB, flags)."""
    train, named = make_data(rows, benchmarks, seed)
    import numpy  # noqa: F401  (imported before the measurement by every method alike)

    import cascade_rl.data.hygiene  # noqa: F401

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    flags = {"naive": run_naive, "index": run_index, "none": lambda t, n: []}[method](train, named)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "before_kib": before, "peak_kib": peak, "flags": flags}))


def measure(method: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", method, "--rows", str(args.rows)]
    command += ["--benchmarks", str(args.benchmarks), "--seed", str(args.seed)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def command_throughput(args: argparse.Namespace) -> float:
    """rows/s of the whole `cascade data decontaminate` command on the same data as JSONL."""
    train, named = make_data(args.rows, args.benchmarks, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "train.jsonl").write_text("".join(json.dumps({"prompt": t}) + "\n" for t in train))
        options = []
        for name, texts in named.items():
            (root / f"{name}.jsonl").write_text("".join(json.dumps({"question": t}) + "\n" for t in texts))
            options += ["-b", f"{name}={root / name}.jsonl"]
        command = [sys.executable, "-m", "cascade_rl.cli", "data", "decontaminate", str(root / "train.jsonl")]
        start = time.perf_counter()
        subprocess.run([*command, "-o", str(root / "out.jsonl"), "-q", *options], check=True, capture_output=True)
        return args.rows / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--benchmarks", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", choices=("naive", "index", "none"))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rows, args.benchmarks, args.seed)
        return 0
    data_only = measure("none", args)["peak_kib"]
    naive, index = measure("naive", args), measure("index", args)
    flagged = sum(naive["flags"])
    disagreements = sum(a != b for a, b in zip(naive["flags"], index["flags"]))
    rate = {name: args.rows / result["seconds"] for name, result in (("naive", naive), ("index", index))}
    ratio = rate["index"] / rate["naive"]
    print(f"{args.rows} training rows, {args.benchmarks} benchmark questions, 9-grams; {flagged} rows contaminated")
    for label, name, result in (("naive set of 9-gram tuples", "naive", naive), ("NgramIndex", "index", index)):
        extra_mib = (result["peak_kib"] - data_only) / 1024
        print(f"{label}: {rate[name]:,.0f} rows/s, peak memory +{extra_mib:.0f} MiB over the data")
    print(f"ratio: {ratio:.1f}x (target >= {TARGET_RATIO:.0f}x); verdict disagreements: {disagreements}")
    print(f"cascade data decontaminate (JSONL in and out, summary): {command_throughput(args):,.0f} rows/s")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
