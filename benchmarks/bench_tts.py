"""Benchmark the test-time-scaling judge and loop (SPEC section 8).

    .venv/bin/python benchmarks/bench_tts.py [--workers 4] [--repeats 3] [--rounds 4] [--candidates 20]

1. **Judge throughput** on a problem with 5 subtasks x 20 tests (each test: read 2,000
   integers, sort them, print a checksum), judging a correct program (every test runs) and a
   program wrong from the 16th test of each subtask on:

   * **ours**: :class:`cascade_rl.tts.judge.Judge` on a pool of ``--workers`` persistent bwrap
     sandboxes (one fork of the sandboxed interpreter per test, subtasks in parallel);
   * **baseline A**, one process per test: ``python solution.py`` started for every test
     (``subprocess``, no isolation), ``--workers`` at a time, outputs compared the same way;
   * **baseline B**, one sandbox per test: ``cascade_rl.sandbox.run_python`` (a fresh bwrap
     sandbox and interpreter per test), ``--workers`` at a time.

   Prints tests/s for each and the ratios; all three must give the same verdicts (exit 1 if not).

2. **Loop time per round, generation excluded**: ``run_tts`` on the shipped max-rectangle with
   an instant scripted generator (``--candidates`` distinct programs per subtask and round that
   pass the samples and fail the tests, so every round filters, selects, submits and saves).
   Rounds are timed between their last steps (median of rounds 2..N), minus the time spent
   inside the generator. The baseline is the sandbox work a round cannot avoid, called
   directly: the samples of every candidate and the two submissions; the difference is the
   loop's own bookkeeping (persistence, prompts, selection, outputs).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cascade_rl import sandbox
from cascade_rl.llm.base import Sampling
from cascade_rl.rewards.code import outputs_match
from cascade_rl.sandbox import Limits
from cascade_rl.tts.judge import Judge, test_limits
from cascade_rl.tts.loop import TTSConfig, run_tts
from cascade_rl.tts.problem import Problem, load_problem, load_problems

CORRECT = (
    "import sys\nvalues = sorted(map(int, sys.stdin.read().split()[1:]))\n"
    "print(sum(v * (i % 7) for i, v in enumerate(values)))\n"
)
WRONG_LATE = CORRECT.replace("print(", "print((len(values) > 2014) + ")  # wrong from the 16th test of a subtask


def make_problem(root: Path, subtasks: int = 5, tests: int = 20, seed: int = 0) -> Problem:
    """A problem.yaml with ``subtasks`` x ``tests`` sorting tests; the last tests are longer."""
    import yaml

    rng = random.Random(seed)
    (root / "statement.md").write_text("Sort the numbers and print the weighted checksum.\n")
    spec = {"id": "bench", "statement": "statement.md", "time_limit_s": 2.0, "memory_mb": 256, "subtasks": []}
    for _ in range(subtasks):
        inline = []
        for t in range(tests):
            values = [rng.randint(-(10**6), 10**6) for _ in range(2000 + t)]
            text = f"{len(values)}\n{' '.join(map(str, values))}\n"
            ordered = sorted(values)
            inline.append({"input": text, "output": f"{sum(v * (i % 7) for i, v in enumerate(ordered))}\n"})
        spec["subtasks"].append({"points": 20, "tests": inline})
    (root / "problem.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_problem(root)


def baseline_verdicts(problem: Problem, code: str, workers: int, sandboxed: bool, workdir: Path) -> list[bool]:
    """Every test in its own process (no early stop, like the judge on a correct program)."""
    program = workdir / "solution.py"
    program.write_text(code)
    tests = [test for subtask in problem.subtasks for test in subtask.tests]
    limits = test_limits(problem)

    def one(test) -> bool:
        if sandboxed:
            run = sandbox.run_python(code, stdin=test.input, limits=limits)
            return run.ok and outputs_match(run.stdout_text, test.answer)
        done = subprocess.run(
            [sys.executable, str(program)], input=test.input, capture_output=True, timeout=limits.time_s
        )
        return done.returncode == 0 and outputs_match(done.stdout.decode(), test.answer)

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, tests))


def judge_verdicts(judge: Judge, problem: Problem, code: str) -> tuple[list[bool], int]:
    result = judge.judge(problem, code)
    return [t.verdict == "AC" for s in result.subtasks for t in s.tests], sum(len(s.tests) for s in result.subtasks)


def timed(function, repeats: int):
    start = time.perf_counter()
    for _ in range(repeats):
        value = function()
    return value, (time.perf_counter() - start) / repeats


def bench_judge(workers: int, repeats: int) -> bool:
    with tempfile.TemporaryDirectory() as directory:
        problem = make_problem(Path(directory))
        total = sum(len(s.tests) for s in problem.subtasks)
        agree = True
        with Judge(workers=workers) as judge:
            judge.judge(problem, CORRECT)  # start the sandboxes
            (ours, ran), seconds = timed(lambda: judge_verdicts(judge, problem, CORRECT), repeats)
            plain, plain_s = timed(
                lambda: baseline_verdicts(problem, CORRECT, workers, False, Path(directory)), repeats
            )
            boxed, boxed_s = timed(lambda: baseline_verdicts(problem, CORRECT, workers, True, Path(directory)), repeats)
            agree &= ours == plain == boxed == [True] * total
            wrong, _ = judge_verdicts(judge, problem, WRONG_LATE)
            wrong_plain = baseline_verdicts(problem, WRONG_LATE, workers, False, Path(directory))
            per_subtask = [wrong_plain[i * 20 : (i + 1) * 20] for i in range(5)]
            expected = [v for group in per_subtask for v in group[: group.index(False) + 1]]
            agree &= wrong == expected  # the judge stops each subtask at its first failure
        print(f"judge: {len(problem.subtasks)} subtasks x 20 tests, {workers} workers, isolation={sandbox.isolation()}")
        print(f"  pooled sandbox judge      {ran / seconds:7.1f} tests/s  ({seconds * 1000:.0f} ms per submission)")
        print(f"  baseline A: process/test  {total / plain_s:7.1f} tests/s  -> judge is {plain_s / seconds:.2f}x")
        print(f"  baseline B: sandbox/test  {total / boxed_s:7.1f} tests/s  -> judge is {boxed_s / seconds:.2f}x")
        print(f"  verdicts agree: {agree}")
        return agree


class InstantGenerator:
    """Distinct programs that pass max-rectangle's samples and fail its tests; times itself."""

    def __init__(self) -> None:
        self.number, self.seconds = 0, 0.0

    def generate(self, messages, sampling=Sampling()):
        start = time.perf_counter()
        texts = []
        for _ in range(sampling.n):
            self.number += 1
            code = f"n, m = map(int, input().split())\nprint(6 if n == 1 else 7)  # variant {self.number}"
            texts.append(f"<think>guess</think>\n```python\n{code}\n```")
        self.seconds += time.perf_counter() - start
        return texts

    async def agenerate(self, messages, sampling=Sampling()):
        return self.generate(messages, sampling)


def round_durations(stamps: dict[int, float]) -> list[float]:
    """Seconds between the last steps of consecutive rounds (round 1 also starts the sandboxes)."""
    rounds = sorted(stamps)
    return [stamps[r] - stamps[r - 1] for r in rounds[1:]]


async def direct_round(judge: Judge, problem: Problem, programs: list[str]) -> None:
    """What a round must do in the sandbox anyway: every candidate's samples, two submissions."""
    import asyncio

    await asyncio.gather(*(judge.arun_samples(problem, code, s) for s in problem.subtasks for code in programs))
    await asyncio.gather(*(judge.ajudge(problem, programs[0]) for _ in problem.subtasks))


def bench_loop(workers: int, rounds: int, candidates: int) -> None:
    import asyncio

    (problem,) = load_problems(["max-rectangle"])
    generator = InstantGenerator()
    stamps: dict[int, float] = {}
    generation_at: dict[int, float] = {}

    def progress(problem_id: str, event: dict) -> None:
        if event["event"] != "step":
            return
        stamps[event["round"]] = time.perf_counter()
        generation_at[event["round"]] = generator.seconds

    with tempfile.TemporaryDirectory() as directory, Judge(workers=workers) as judge:
        config = TTSConfig(rounds=rounds, candidates=candidates, selection="first", max_generations=10**6)
        (summary,) = run_tts([problem], generator, Path(directory), config, judge=judge, progress=progress)
        generation = [generation_at[r] - generation_at[r - 1] for r in sorted(generation_at)[1:]]
        loop_rounds = sorted(d - g for d, g in zip(round_durations(stamps), generation))
        programs = [f"n, m = map(int, input().split())\nprint(6 if n == 1 else 7)  # {i}" for i in range(candidates)]
        direct = []
        for _ in range(3):
            start = time.perf_counter()
            asyncio.run(direct_round(judge, problem, programs))
            direct.append(time.perf_counter() - start)
    per_round, sandbox_work = loop_rounds[len(loop_rounds) // 2], sorted(direct)[1]
    print(f"loop: max-rectangle, {rounds} rounds x 2 subtasks x {candidates} candidates, {workers} workers")
    print(f"  per round, generation excluded (median of rounds 2-{rounds}): {per_round * 1000:.0f} ms")
    print(
        f"  baseline, the same sandbox work called directly (samples of every candidate, 2 submissions): "
        f"{sandbox_work * 1000:.0f} ms"
    )
    print(
        f"  loop bookkeeping (saving, prompts, selection, outputs): {(per_round - sandbox_work) * 1000:.0f} ms "
        f"per round; ratio round / direct: {per_round / sandbox_work:.2f}x; {summary['generations']['used']} "
        "generations"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--candidates", type=int, default=20)
    args = parser.parse_args()
    Limits()  # the sandbox module is importable and configured
    agree = bench_judge(args.workers, args.repeats)
    bench_loop(args.workers, args.rounds, args.candidates)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
