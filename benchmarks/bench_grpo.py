"""Cost of the cascade layer over bare TRL (issue 3 performance target: at most 10%).

The same tiny GRPO stage — same model, prompts, reward (the math verifier), batch (16 prompts x
8 rollouts), sampling and optimizer settings — runs once through ``cascade_rl`` (registry
reward adapter, dynamic-filtering sampler, half/half modes off, metrics.jsonl, timers) and once
through a bare ``trl.GRPOTrainer`` with a plain reward function. Runs alternate (bare, cascade,
bare, cascade) and the median wall time per step of each is compared; the first step of each
run (compilation, worker start-up) is left out.

    .venv/bin/python benchmarks/bench_grpo.py [--steps 8] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import torch  # noqa: E402

torch.set_num_threads(1)

from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer, TrainerCallback  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from cascade_rl.chat import render, with_mode  # noqa: E402
from cascade_rl.recipe import parse_recipe  # noqa: E402
from cascade_rl.rewards.math import score as math_score  # noqa: E402
from cascade_rl.train.common import read_metrics  # noqa: E402
from cascade_rl.train.grpo import grpo_config, run_grpo_stage  # noqa: E402
from cascade_rl.world.model import build_tiny_model  # noqa: E402
from cascade_rl.world.tokenizer import build_tokenizer  # noqa: E402

PROMPTS, ROLLOUTS, MAX_TOKENS = 16, 8, 32


def make_data(root: Path) -> Path:
    rng = random.Random(0)
    rows = []
    for _ in range(256):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        rows.append({"prompt": f"What is {a} + {b}?", "answer": str(a + b)})
    path = root / "rl.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_model(root: Path, data: Path) -> Path:
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
    tokenizer = build_tokenizer(texts, vocab_size=512)
    build_tiny_model(
        tokenizer,
        hidden_size=128,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=384,
        out_dir=root / "model",
    )
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


class StepTimer(TrainerCallback):
    def __init__(self):
        self.times, self.last = [], None

    def on_step_begin(self, args, state, control, **kwargs):
        self.last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self.last)


def bare_trl(model: Path, data: Path, steps: int, out: Path) -> list[float]:
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
    timer = StepTimer()
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model),
        callbacks=[timer],
    )
    trainer.train()
    return timer.times


def cascade(model: Path, data: Path, steps: int, out: Path) -> list[float]:
    recipe = stage_recipe(data, steps)
    run_grpo_stage(recipe.stages[0], model_in=model, stage_dir=out, runtime=recipe.runtime, seed=0, reward_options={})
    metrics = read_metrics(out / "metrics.jsonl")
    return [m["time/step"] for m in metrics]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = make_data(root)
        model = make_model(root, data)
        bare_steps, cascade_steps = [], []
        for repeat in range(options.repeats):
            bare_steps += bare_trl(model, data, options.steps, root / f"bare-{repeat}")[1:]
            cascade_steps += cascade(model, data, options.steps, root / f"cascade-{repeat}")[1:]
    bare, ours = statistics.median(bare_steps), statistics.median(cascade_steps)
    print(f"GRPO step ({PROMPTS} prompts x {ROLLOUTS} rollouts, <= {MAX_TOKENS} tokens, tiny Qwen3, 1 thread)")
    print(f"bare TRL GRPOTrainer : {bare:.3f} s/step (median of {len(bare_steps)})")
    print(f"cascade_rl stage     : {ours:.3f} s/step (median of {len(cascade_steps)})")
    overhead = ours / bare - 1
    print(
        f"ratio cascade / bare : {ours / bare:.3f} (overhead {100 * overhead:+.1f}%; target <= +10%: "
        f"{'met' if overhead <= 0.10 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
