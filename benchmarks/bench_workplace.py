"""Benchmark the workplace environment (issue 44; SPEC section 11): what one episode and one
verdict cost, against the obvious baseline of reading the five databases from their CSV files for
every episode (what NeMo Gym's environment does per session).

    .venv/bin/python benchmarks/bench_workplace.py [--episodes 200] [--seed 0]

Workload: ``--episodes`` generated workplace tasks (``cascade data workplace``'s families), each
played as a two-turn episode: a reading call (the search or look-up the task needs), then the
task's reference calls, then an answer; then the verdict (the episode's calls and the reference
replayed on fresh copies, states compared).

* **ours**: :class:`~cascade_rl.rewards.workplace.scorer.WorkplaceEpisode` (the databases read
  once per process and copied per episode and per replay).
* **baseline**: the same episodes with every fresh copy read from the CSV files again.

Both must give every episode reward 1. Prints episodes/s for each and the ratio, and the
milliseconds of a fresh copy, of one verdict and of one tool call.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from unittest import mock

from cascade_rl.data.workplace import HeldOut, TaskReport, draw_tasks
from cascade_rl.rewards.workplace import database
from cascade_rl.rewards.workplace.scorer import WorkplaceEpisode, verdict

READS = {
    "email": ("email_search_emails", {"query": "update"}),
    "calendar": ("calendar_search_events", {"query": "sync"}),
    "project_management": ("project_management_search_tasks", {"board": "Design"}),
    "customer_relationship_manager": ("customer_relationship_manager_search_customers", {"status": "Lead"}),
    "analytics": ("analytics_total_visits_count", {"time_min": "2023-11-01"}),
}


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def play(tasks) -> tuple[float, list[float]]:
    start, rewards = time.perf_counter(), []
    for task in tasks:
        episode = WorkplaceEpisode([{"role": "user", "content": task.request}], ground_truth=task.ground_truth)
        episode.step(call(*READS[task.category]))
        episode.step("".join(call(name, arguments) for name, arguments in task.calls))
        episode.step("Done.")
        rewards.append(episode.score().reward)
    return time.perf_counter() - start, rewards


#: the baseline: the databases read from their files at every fresh copy
uncached_builtin = database._builtin.__wrapped__


def timed(function, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        function()
    return (time.perf_counter() - start) / repeat * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tasks = draw_tasks(args.episodes, random.Random(args.seed), HeldOut(), TaskReport())
    print(f"cpu: {platform.processor() or platform.machine()}, python {sys.version.split()[0]}; {len(tasks)} episodes")
    play(tasks[:5])  # warm the cache and the imports
    ours, ours_rewards = play(tasks)
    with mock.patch.object(database, "_builtin", uncached_builtin):
        baseline, baseline_rewards = play(tasks)
    if ours_rewards != baseline_rewards or min(ours_rewards) < 1.0:
        print("rewards disagree or an episode failed", file=sys.stderr)
        return 1
    print(f"ours:     {len(tasks) / ours:8.1f} episodes/s")
    print(f"baseline: {len(tasks) / baseline:8.1f} episodes/s (databases read from CSV per copy)")
    print(f"ratio:    {baseline / ours:8.2f}x")
    task = tasks[0]
    print(
        f"fresh copy: {timed(database.Workplace.fresh, 50):.2f} ms; read from CSV: {timed(uncached_builtin, 10):.2f} ms"
    )
    print(f"one verdict: {timed(lambda: verdict(task.ground_truth, task.ground_truth), 20):.2f} ms")
    episode = WorkplaceEpisode([{"role": "user", "content": "x"}], ground_truth=[])
    print(f"one tool call (email search): {timed(lambda: episode.step(call(*READS['email'])), 5):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
