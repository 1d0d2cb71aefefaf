"""Cost of the cascade layer over bare TRL, in one process (issue 3 target: at most 10%) and in
two processes under ``torchrun --nproc_per_node 2`` (gloo, CPU; issue 8 target: at most 5%).

The same tiny GRPO stage — same model, prompts, reward (the math verifier), batch (16 prompts x
8 rollouts), sampling and optimizer settings — runs once through ``cascade_rl`` (registry
reward adapter, prompt schedule with dynamic filtering, metrics.jsonl, timers; in two
processes also the gathered rewards, the schedule digests compared every step and the
main-process writes) and once through a bare ``trl.GRPOTrainer`` with a plain reward function
and TRL's own ``RepeatSampler``. Runs alternate (bare, cascade, bare, cascade, ...); a step's
time is the wall time between the ends of consecutive optimizer steps (everything: data
loading, generation, rewards, update, callbacks), so the first step (compilation, worker
start-up) is left out; the same timer also takes each step's CPU time over all processes, which
a shared, loaded machine disturbs far less than wall time. Each round's two medians give a
ratio; the result is the median of the rounds' ratios (neighbouring runs see similar load).

    .venv/bin/python benchmarks/bench_grpo.py [--processes 1 2] [--steps 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import psutil  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer, TrainerCallback  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from cascade_rl.chat import render, with_mode  # noqa: E402
from cascade_rl.recipe import parse_recipe  # noqa: E402
from cascade_rl.rewards.math import score as math_score  # noqa: E402
from cascade_rl.train import distributed, trl_backend  # noqa: E402
from cascade_rl.train.context import StageContext  # noqa: E402
from cascade_rl.train.grpo import grpo_config, run_grpo_stage  # noqa: E402
from cascade_rl.world.model import build_tiny_model  # noqa: E402
from cascade_rl.world.tokenizer import build_tokenizer  # noqa: E402

PROMPTS, ROLLOUTS, MAX_TOKENS = 16, 8, 32
TARGETS = {1: 0.10, 2: 0.05}  # largest overhead allowed, by process count


def make_data(root: Path) -> Path:
    rng = random.Random(0)
    rows = []
    for _ in range(256):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        rows.append({"prompt": f"What is {a} + {b}?", "answer": str(a + b)})
    path = root / "rl.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


TINY_SIZES = dict(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=384)


def addition_tokenizer(data: Path):
    """A byte-level BPE trained on the addition prompts of ``data`` with boxed answers."""
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    texts = [
        render(
            [
                {"role": "user", "content": r["prompt"]},
                {"role": "assistant", "content": f"<think>add</think>\\boxed{{{r['answer']}}}"},
            ]
        )
        for r in rows
    ]
    return build_tokenizer(texts, vocab_size=512)


def make_model(root: Path, data: Path) -> Path:
    build_tiny_model(addition_tokenizer(data), out_dir=root / "model", **TINY_SIZES)
    return root / "model"


def stage_recipe(data: Path, steps: int):
    return parse_recipe(
        {
            "name": "bench",
            "model": {"path": "unused"},
            "runtime": {"reward_workers": 1},
            "stages": [
                {
                    "kind": "grpo",
                    "name": "bench",
                    "data": str(data),
                    "domain": "math",
                    "thinking": "think",
                    "rollouts_per_prompt": ROLLOUTS,
                    "prompts_per_batch": PROMPTS,
                    "learning_rate": 1e-5,
                    "temperature": 1.0,
                    "dynamic_filter": {"enabled": True},
                    "curriculum": [{"max_response_length": MAX_TOKENS, "overlong_filter": False, "max_steps": steps}],
                }
            ],
        }
    )


def cpu_seconds() -> float:
    """CPU time of this process (all threads) and of its live children (the math-verify workers)."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


class StepEnds(TrainerCallback):
    """When each optimizer step ended: wall clock and CPU time (this process and its children)."""

    def __init__(self):
        self.walls, self.cpus = [], []

    def on_step_end(self, args, state, control, **kwargs):
        self.walls.append(time.perf_counter())
        self.cpus.append(cpu_seconds())

    def steps(self) -> dict[str, list[float]]:
        """Per step after the first (the time between consecutive step ends): the wall time seen
        by the main process, and the CPU time of all processes together."""
        cpus = [differences(c) for c in distributed.gather(self.cpus)]
        return {"wall": differences(self.walls), "cpu": [sum(step) for step in zip(*cpus)]}


def differences(ends: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(ends, ends[1:])]


def bare_trl(model: Path, data: Path, steps: int, out: Path) -> dict[str, list[float]]:
    """A plain TRL script: the same GRPOConfig, RepeatSampler, a reward function calling the scorer."""
    recipe = stage_recipe(data, steps)
    stage = recipe.stages[0]
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    dataset = Dataset.from_list(
        [
            {"prompt": with_mode([{"role": "user", "content": r["prompt"]}], "think"), "answer": r["answer"]}
            for r in rows
        ]
    )

    def reward(completions, answer, **_):
        return [math_score(c[0]["content"], answer=a).reward for c, a in zip(completions, answer)]

    args = grpo_config(stage, stage.curriculum[0], recipe.runtime, out, 0)
    args.shuffle_dataset = True
    timer = StepEnds()
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model),
        callbacks=[timer],
    )
    trainer.train()
    return timer.steps()


def cascade(model: Path, data: Path, steps: int, out: Path) -> dict[str, list[float]]:
    """The cascade stage, with the same step timer added to its trainer (measurement only)."""
    recipe = stage_recipe(data, steps)
    timer = StepEnds()
    engine = trl_backend.OnPolicyTrainer

    class TimedTrainer(engine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.add_callback(timer)

    trl_backend.OnPolicyTrainer = TimedTrainer
    try:
        stage = recipe.stages[0]
        run_grpo_stage(stage, StageContext.settle(policy=model, stage_dir=out, runtime=recipe.runtime, seed=0))
    finally:
        trl_backend.OnPolicyTrainer = engine
    return timer.steps()


RUNNERS = {"bare": bare_trl, "cascade": cascade}


def in_process(kind: str, model: Path, data: Path, steps: int, out: Path) -> dict[str, list[float]]:
    return RUNNERS[kind](model, data, steps, out)


def two_processes(kind: str, model: Path, data: Path, steps: int, out: Path) -> dict[str, list[float]]:
    """One run under ``torchrun --nproc_per_node 2`` (this file as the worker)."""
    times = out.with_suffix(".json")
    command = [
        str(Path(sys.executable).with_name("torchrun")),
        "--nproc_per_node",
        "2",
        "--master_port",
        str(29600 + os.getpid() % 1000),
        __file__,
        "--worker",
        kind,
        "--model",
        str(model),
        "--data",
        str(data),
        "--steps",
        str(steps),
        "--out",
        str(out),
    ]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=environment)
    if result.returncode != 0:
        raise SystemExit(f"{kind} run in 2 processes failed:\n{result.stderr[-3000:]}")
    return json.loads(times.read_text())


def worker(kind: str, model: Path, data: Path, steps: int, out: Path) -> None:
    """Inside torchrun: one run; the main process writes the step times beside ``out``."""
    distributed.start()
    times = RUNNERS[kind](model, data, steps, out)
    if distributed.is_main():
        out.with_suffix(".json").write_text(json.dumps(times))


def measure(processes: int, model: Path, data: Path, steps: int, repeats: int, root: Path) -> dict[str, list]:
    """Alternating rounds (bare, cascade, ...): every round's step times, per runner."""
    run = in_process if processes == 1 else two_processes
    rounds: dict[str, list] = {"bare": [], "cascade": []}
    for repeat in range(repeats):
        for kind in rounds:
            times = run(kind, model, data, steps, root / f"{kind}-{processes}p-{repeat}")
            rounds[kind].append(times)
            wall, cpu = statistics.median(times["wall"]), statistics.median(times["cpu"])
            print(f"  {processes} process(es), round {repeat + 1}, {kind}: {wall:.3f} s/step wall, {cpu:.3f} s CPU")
    return rounds


def report(processes: int, rounds: dict[str, list]) -> None:
    """Per measure (wall, CPU): pooled medians, and the ratio as the median over rounds of
    cascade / bare, each round's two runs being neighbours in time (robust to the load drifting
    over the benchmark). CPU time (all processes, per step) is the measure the machine's load
    disturbs least."""
    target = TARGETS[processes]
    count = sum(len(times["wall"]) for times in rounds["bare"])
    print(f"{processes} process(es), {'torchrun + gloo' if processes > 1 else 'in process'}, {count} steps per runner:")
    for measure, unit in (("wall", "s/step wall (main process)"), ("cpu", "CPU s/step (all processes)")):
        bare = statistics.median(t for times in rounds["bare"] for t in times[measure])
        ours = statistics.median(t for times in rounds["cascade"] for t in times[measure])
        pairs = [
            statistics.median(c[measure]) / statistics.median(b[measure])
            for b, c in zip(rounds["bare"], rounds["cascade"])
        ]
        ratio = statistics.median(pairs)
        verdict = "met" if ratio - 1 <= target else "NOT met"
        print(f"  {unit}: bare TRL {bare:.3f}, cascade {ours:.3f}; rounds {' '.join(f'{r:.3f}' for r in pairs)}")
        print(
            f"    ratio cascade / bare {ratio:.3f} (median of rounds; overhead {100 * (ratio - 1):+.1f}%; "
            f"target <= +{100 * target:.0f}%: {verdict})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", choices=[1, 2], default=[1, 2])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        worker(options.worker, options.model, options.data, options.steps, options.out)
        return
    print(f"GRPO step ({PROMPTS} prompts x {ROLLOUTS} rollouts, <= {MAX_TOKENS} tokens, tiny Qwen3, 1 thread/process)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = make_data(root)
        model = make_model(root, data)
        results = {p: measure(p, model, data, options.steps, options.repeats, root) for p in options.processes}
    for processes, rounds in results.items():
        report(processes, rounds)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average at the end (1/5/15 min): {load} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
