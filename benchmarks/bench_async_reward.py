"""Asynchronous verification of Code RL rollouts against scoring after generation (issue 39 item 1;
SPEC section 6: the paper's verification went from 1172 s to 416 s per batch on 8 nodes).

One Code RL stage -- the cascade's own GRPO trainer, sampler and code reward (every program's
tests in the bubblewrap sandbox pool of ``--workers`` sandboxes) -- runs with
``runtime.async_rewards`` true (each rollout verified as it finishes, while the rest of the step
is generated) and false (the step's rollouts verified after its generation), alternating
(sync, async, sync, async, ...: neighbouring runs see similar load). The same seed gives both
runs the same rollouts, so both verify the same programs; the benchmark checks that they get the
same rewards. Per step (the first left out: sandbox and engine start-up) it reads from
``metrics.jsonl``:

* generation + verification wall time: ``time/generation`` (the trainer's generation call) plus
  ``time/reward`` (the scoring step: what verification still costs once generation has ended);
* ``time/verification``: wall time during which some program was being verified;
* ``time/verification_hidden``: the part of it that ran while the step was still generating.

Two policies write the programs, both on the toy world's Code RL prompts (stdin/stdout problems):
the toy model (the tiny Qwen3 of ``recipes/tiny.yaml``, given a short SFT on the world's code
answers here so that it writes fenced programs) and the real model (SmolLM2-135M-Instruct,
``--real-model``; gitignored, not downloaded here). **Slow tests**: each problem's tests are
repeated to ``--tests`` cases (the paper's problems carry dozens), so that verifying a program
costs what a real suite costs -- one sandboxed run per case.

    .venv/bin/python benchmarks/bench_async_reward.py [--models toy real] [--rounds 2] [--steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from cascade_rl.recipe import parse_recipe  # noqa: E402
from cascade_rl.train.cascade import Cascade  # noqa: E402
from cascade_rl.train.common import read_metrics  # noqa: E402
from cascade_rl.train.context import StageContext  # noqa: E402
from cascade_rl.train.grpo import run_grpo_stage  # noqa: E402
from cascade_rl.world.build import WorldSizes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: recipes/tiny.yaml's model
TOY_MODEL = dict(hidden_size=256, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=768)
#: what the real model is told around a toy task, so that it answers with a program (13 of 16
#: samples hold a python block, against 0 of 16 for the bare task)
INSTRUCTION = (
    "Write a Python 3 program for this task. It reads standard input and prints the answer. Give the whole "
    "program in one ```python code block.\n\nTask: "
)


@dataclass(frozen=True)
class Shape:
    """One model's Code RL step: prompts, rollouts per prompt, response budget, thinking mode and
    what its prompts say before the task."""

    prompts: int
    rollouts: int
    budget: int
    thinking: str
    instruction: str = ""


SHAPES = {"toy": Shape(8, 8, 96, "think"), "real": Shape(4, 4, 192, "no_think", INSTRUCTION)}


def toy(cache: Path) -> tuple[Path, Path]:
    """The toy world's code rows only (SFT answers: fenced programs; Code RL prompts) and the tiny
    model after a short SFT on them, so that it writes programs: (world directory, model)."""
    run = cache / "toy"
    model = run / "01-sft" / "model"
    if not model.exists():
        zero = {name: 0 for name in WorldSizes.__dataclass_fields__ if name != "vocab_size"}
        recipe = {
            "name": "bench-async-toy",
            "seed": 0,
            "world": {"seed": 0, "sizes": {**zero, "sft_code": 1000, "rl_code": 64}},
            "model": {"tiny": TOY_MODEL},
            "runtime": {"torch_threads": 2},
            "stages": [{"kind": "sft", "name": "sft", "substages": [{
                "name": "sft", "data": "${world}/sft.jsonl", "max_length": 512, "epochs": 2,
                "learning_rate": 1.0e-3, "batch_size": 8, "per_device_batch_size": 8, "warmup_ratio": 0.05,
            }]}],
        }  # fmt: skip
        Cascade(parse_recipe(recipe), run).run()
    return run / "world", model


def slow_tests(world_dir: Path, cases: int, instruction: str) -> Path:
    """The Code RL prompts, each task after ``instruction``, with each problem's tests repeated to
    ``cases`` runs."""
    rows = []
    for line in (world_dir / "rl_code.jsonl").read_text().splitlines():
        row = json.loads(line)
        tests = row["tests"] if isinstance(row["tests"], dict) else json.loads(row["tests"])
        repeats = -(-cases // len(tests["inputs"]))
        row["tests"] = {key: (tests[key] * repeats)[:cases] for key in ("inputs", "outputs")}
        row["prompt"] = [{**turn, "content": instruction + turn["content"]} for turn in row["prompt"]]
        rows.append(row)
    path = world_dir / f"rl_code_{cases}_tests{'_instructed' if instruction else ''}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def run_stage(policy: Path, data: Path, out: Path, *, asynchronous: bool, shape: Shape, args) -> list:
    """One Code RL stage of ``args.steps`` steps; its metrics.jsonl rows. Every test of every
    program runs (``stop_on_failure: false``): the suite's full cost, as a judge reporting each
    test's verdict pays it."""
    recipe = parse_recipe({
        "name": "bench-async",
        "model": {"path": str(policy)},
        "runtime": {"reward_workers": args.workers, "async_rewards": asynchronous, "torch_threads": args.threads,
                    "save_steps": None},
        "stages": [{
            "kind": "grpo", "name": "code", "data": str(data), "domain": "code", "thinking": shape.thinking,
            "reward_options": {"code": {"stop_on_failure": False}},
            "prompts_per_batch": shape.prompts, "rollouts_per_prompt": shape.rollouts, "learning_rate": 1.0e-5,
            "curriculum": [{"max_response_length": shape.budget, "overlong_filter": False, "max_steps": args.steps}],
        }],
    })  # fmt: skip
    context = StageContext.settle(recipe.runtime, seed=0, stage_dir=out, policy=policy)
    run_grpo_stage(recipe.stages[0], context)
    return read_metrics(out / "metrics.jsonl")


def summary(runs: list[list[dict]]) -> dict[str, float]:
    """Medians over the runs' steps after the first: generation + verification, verification,
    hidden verification."""
    steps = [step for run in runs for step in run[1:]]
    return {
        "generation": statistics.median(s["time/generation"] for s in steps),
        "wall": statistics.median(s["time/generation"] + s["time/reward"] for s in steps),
        "exposed": statistics.median(s["time/reward"] for s in steps),
        "verification": statistics.median(s["time/verification"] for s in steps),
        "hidden": statistics.median(s["time/verification_hidden"] for s in steps),
    }


def bench(name: str, policy: Path, data: Path, args: argparse.Namespace, scratch: Path) -> None:
    runs: dict[bool, list] = {False: [], True: []}
    shape = SHAPES[name]
    for round_index in range(args.rounds):
        for asynchronous in (False, True):
            out = scratch / f"{name}-{round_index}-{'async' if asynchronous else 'sync'}"
            runs[asynchronous].append(run_stage(policy, data, out, asynchronous=asynchronous, shape=shape, args=args))
    rewards = {a: [[s.get("reward/mean") for s in run] for run in found] for a, found in runs.items()}
    same = all(r == rewards[False][0] for r in rewards[False] + rewards[True])
    sync, asynchronous = summary(runs[False]), summary(runs[True])
    print(
        f"\n{name}: {shape.prompts} prompts x {shape.rollouts} rollouts, {shape.budget} tokens, {args.tests} tests "
        f"per program, {args.workers} sandbox(es), {args.threads} torch thread(s); medians of {args.rounds} x "
        f"{args.steps - 1} steps per mode"
    )
    print(f"  same rewards in every run and mode: {same}  (reward/mean per step: {rewards[False][0]})")
    print("  mode   generation  +verification(exposed)  =wall   verification  hidden  hidden share")
    for label, row in (("sync", sync), ("async", asynchronous)):
        share = row["hidden"] / row["verification"] if row["verification"] else 0.0
        print(
            f"  {label:<6} {row['generation']:9.2f}s  {row['exposed']:20.2f}s  {row['wall']:6.2f}s"
            f"  {row['verification']:11.2f}s  {row['hidden']:5.2f}s  {share:11.0%}"
        )
    print(
        f"  async / sync wall time: {asynchronous['wall'] / sync['wall']:.2f}; "
        f"exposed verification {sync['exposed']:.2f}s -> {asynchronous['exposed']:.2f}s"
    )


def machine() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        model = platform.processor()
    return f"{model}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=("toy", "real"), default=["toy", "real"])
    parser.add_argument("--rounds", type=int, default=2, help="sync/async pairs of runs")
    parser.add_argument("--steps", type=int, default=4, help="steps per run (the first is left out)")
    parser.add_argument("--tests", type=int, default=24, help="test cases per problem")
    parser.add_argument("--workers", type=int, default=1, help="reward workers (sandboxes)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the trainer")
    parser.add_argument("--real-model", type=Path, default=ROOT / "models" / "smollm2-135m-instruct")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "cascade-bench-async")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    world_dir, toy_model = toy(args.cache)
    with tempfile.TemporaryDirectory(prefix="bench-async-") as scratch:
        for name in args.models:
            policy = toy_model if name == "toy" else args.real_model
            if not (Path(policy) / "config.json").exists():
                print(f"\n{name}: no model at {policy} (--real-model); skipped")
                continue
            data = slow_tests(world_dir, args.tests, SHAPES[name].instruction)
            bench(name, Path(policy), data, args, Path(scratch))
    print(f"\nmachine after: {machine()}")


if __name__ == "__main__":
    main()
