"""SWE pipeline benchmarks (issue 5), each with a ratio against a baseline measured in the same run.

1. Localisation retrieval over a synthetic repository of 5,000 files: the BM25 index is built
   once and reused (target: queries under 50 ms) vs a straightforward per-query index rebuild.
2. Validation of 32 candidate patches x 20 tests in sandboxed throw-away copies: a pool of 2
   workers vs sequential runs (target: at least 1.7x on 2 cores).

    .venv/bin/python benchmarks/bench_swe.py [--files 5000] [--candidates 32] [--tests 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cascade_rl.swe.localize import BM25Retriever
from cascade_rl.swe.repo import Repository
from cascade_rl.swe.validate import Validator

WORDS = (
    "parse load save render cache token stream buffer index query merge split route "
    "config schema field record batch queue worker retry timeout handler session user "
    "order price stock cart report metric sample filter group window"
).split()


def synthetic_files(count: int, rng: random.Random) -> dict[str, str]:
    files = {}
    for i in range(count):
        names = [f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{i}_{j}" for j in range(6)]
        body = "".join(
            f"def {name}(value):\n    return {rng.choice(WORDS)}(value) + {j}\n\n\n" for j, name in enumerate(names)
        )
        files[f"pkg/{rng.choice(WORDS)}/module_{i}.py"] = f'"""{" ".join(rng.sample(WORDS, 8))}."""\n\n' + body
    return files


def bench_retrieval(count: int, queries: int = 50, rebuilds: int = 3) -> dict:
    rng = random.Random(0)
    files = synthetic_files(count, rng)
    targets = rng.sample(sorted(files), queries)
    issues = [f"Calling {files[t].split('def ')[3].split('(')[0]} crashes on empty input" for t in targets]

    start = time.perf_counter()
    retriever = BM25Retriever(files)
    build_s = time.perf_counter() - start
    times, hits = [], 0
    for target, issue in zip(targets, issues):
        start = time.perf_counter()
        ranking = retriever.rank(issue, 10)
        times.append(time.perf_counter() - start)
        hits += ranking[0] == target
    rebuild_times = []
    for issue in issues[:rebuilds]:
        start = time.perf_counter()
        BM25Retriever(files).rank(issue, 10)
        rebuild_times.append(time.perf_counter() - start)
    query_ms = statistics.mean(times) * 1000
    return {
        "files": count,
        "build_s": build_s,
        "query_ms_mean": query_ms,
        "query_ms_p95": sorted(times)[int(0.95 * len(times)) - 1] * 1000,
        "rebuild_query_ms": statistics.mean(rebuild_times) * 1000,
        "speedup": statistics.mean(rebuild_times) * 1000 / query_ms,
        "recall@1": hits / queries,
    }


MODULE = "def scale(value, factor):\n    return value * factor\n"
TEST = "from calc import scale\n\n\ndef test_scale_{i}():\n    assert scale({i}, 2) == {double}\n"


def synthetic_repository(root: Path, tests: int) -> Repository:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(MODULE)
    for i in range(tests):
        (root / "tests" / f"test_scale_{i}.py").write_text(TEST.format(i=i, double=2 * i))
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "-C", str(root)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "base"], check=True)
    return Repository.open(root, "HEAD")


def candidate_patches(count: int) -> list[str]:
    from cascade_rl.rewards.swe_edits import unified_diff

    patches = []
    for i in range(count):  # distinct patches; every other one breaks the tests
        body = f"    return value * factor  # variant {i}\n" if i % 2 else f"    return value + factor + {i}\n"
        patches.append(unified_diff({"calc.py": MODULE}, {"calc.py": MODULE.splitlines(True)[0] + body}))
    return patches


def bench_validation(candidates: int, tests: int, workers: int = 2) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        repo = synthetic_repository(Path(scratch) / "repo", tests)
        patches = candidate_patches(candidates)
        regression = [f"tests/test_scale_{i}.py::test_scale_{i}" for i in range(tests)]
        seconds = {}
        for pool_size in (1, workers):
            with Validator(repo, workers=pool_size) as validator:
                start = time.perf_counter()
                results = validator.validate(patches, regression, [])
                seconds[pool_size] = time.perf_counter() - start
            passing = sum(r.regression_ok for r in results.values())
            assert passing == candidates // 2, f"expected {candidates // 2} passing candidates, got {passing}"
    return {
        "candidates": candidates,
        "tests": tests,
        "sequential_s": seconds[1],
        f"pool{workers}_s": seconds[workers],
        "speedup": seconds[1] / seconds[workers],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--candidates", type=int, default=32)
    parser.add_argument("--tests", type=int, default=20)
    args = parser.parse_args()

    retrieval = bench_retrieval(args.files)
    print(
        f"retrieval: {retrieval['files']} files, index built once in {retrieval['build_s']:.2f} s; "
        f"query {retrieval['query_ms_mean']:.1f} ms mean, {retrieval['query_ms_p95']:.1f} ms p95 "
        f"(target < 50 ms); per-query rebuild {retrieval['rebuild_query_ms']:.0f} ms; "
        f"ratio {retrieval['speedup']:.0f}x; recall@1 of the planted file {retrieval['recall@1']:.2f}"
    )
    validation = bench_validation(args.candidates, args.tests)
    print(
        f"validation: {validation['candidates']} candidates x {validation['tests']} tests, "
        f"sequential {validation['sequential_s']:.1f} s, pool of 2 {validation['pool2_s']:.1f} s; "
        f"ratio {validation['speedup']:.2f}x (target >= 1.7x on 2 cores)"
    )
    failed = retrieval["query_ms_mean"] >= 50 or validation["speedup"] < 1.7
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
