"""The real model on this CPU: what makes SmolLM2-135M-Instruct (134.5M parameters, a
49,152-token vocabulary) train and sample fastest, each setting against full-precision full
fine-tuning measured in the same run (issue 18, "fast enough on a CPU").

* **GRPO step**: one IF-RL stage of ``--steps`` steps (``--prompts`` GSM8K training questions
  with IFEval-family constraints, 4 rollouts each, up to ``--tokens`` new tokens, 2 micro-batches
  per step) through the cascade's GRPO engine (``run_grpo_stage``), per setting: seconds per step
  after the first (the median; split into generation and the rest: reward + update), and
  rollout tokens per second. Settings: float32 full fine-tuning (the baseline), bfloat16 autocast
  over float32 weights (``runtime.bf16``), LoRA r 16 over float32 weights, LoRA over bfloat16
  weights (``model.dtype: bfloat16``), the last with one thread instead of two.
* **Sampling**: the local sampling loop (evaluation, prompt filter) on ``--sample-prompts`` GSM8K
  test questions, T 0.6, top-p 0.95, up to ``--tokens`` new tokens: float32 vs bfloat16
  weights, two threads vs one, 32 sequences per batch vs 96 (samples and tokens per second).

Needs the imported model (``make real-model``). Measure with nothing else running: two threads
collapse when another process competes for the cores (the figures print the load average).

    .venv/bin/python benchmarks/bench_real.py [--steps 3] [--prompts 4] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "smollm2-135m-instruct"
DATA = Path(os.environ.get("CASCADE_REAL_DATA", ROOT.parent / "shared" / "real-data"))

#: (label, model.dtype, runtime.bf16, lora, threads)
SETTINGS = [
    ("float32, full fine-tuning (baseline)", "float32", False, False, 2),
    ("float32 weights + bf16 autocast, full", "float32", True, False, 2),
    ("LoRA r16 over float32 weights", "float32", False, True, 2),
    ("LoRA r16 over bfloat16 weights", "bfloat16", False, True, 2),
    ("LoRA r16 over bfloat16 weights, 1 thread", "bfloat16", False, True, 1),
]


def if_rows(folder: Path, count: int) -> Path:
    """IF-RL rows as the real recipe builds them: GSM8K training questions + constraints."""
    from cascade_rl.data.formats import FORMATS

    rows = []
    with open(DATA / "gsm8k" / "train.jsonl") as handle:
        for line in handle:
            row = FORMATS["constrain"].convert(json.loads(line), seed=0, constraints="1-2")
            if isinstance(row, dict):
                rows.append(row)
            if len(rows) == count * 8:
                break
    path = folder / "if.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def grpo_step_seconds(label, dtype, bf16, lora, threads, args, data: Path) -> dict:
    from cascade_rl.recipe import parse_recipe
    from cascade_rl.train.context import StageContext
    from cascade_rl.train.grpo import run_grpo_stage

    torch.set_num_threads(threads)
    stage = {
        "kind": "grpo",
        "name": "ifrl",
        "data": str(data),
        "domain": "ifeval",
        "thinking": "no_think",
        "rollouts_per_prompt": 4,
        "prompts_per_batch": args.prompts,
        "per_device_batch_size": args.prompts * 2,
        "temperature": 1.0,
        "learning_rate": 1e-4 if lora else 1e-5,
        "curriculum": [{"max_response_length": args.tokens, "max_steps": args.steps}],
    }
    if lora:
        stage["lora"] = {"r": 16, "alpha": 32}
    recipe = parse_recipe(
        {
            "name": "bench",
            "model": {"path": str(MODEL), "chat_template": "keep", "dtype": dtype},
            "runtime": {"bf16": bf16, "torch_threads": threads, "reward_workers": 1, "save_steps": None},
            "stages": [stage],
        }
    )
    with tempfile.TemporaryDirectory() as folder:
        stage_dir = Path(folder) / "01-ifrl"
        run_grpo_stage(
            recipe.stages[0],
            StageContext.settle(policy=MODEL, stage_dir=stage_dir, runtime=recipe.runtime, seed=0, dtype=dtype),
        )
        metrics = [json.loads(line) for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]
    later = metrics[1:] or metrics
    step = statistics.median(m["time/step"] for m in later)
    generation = statistics.median(m.get("time/generation", 0.0) for m in later)
    tokens = statistics.median(m.get("rollouts/total", 0) * m.get("response_length/mean", 0.0) for m in later)
    return {"label": label, "step": step, "generation": generation, "tokens_per_s": tokens / generation}


def sampling_rate(dtype: str, threads: int, batch: int, args) -> dict:
    from cascade_rl.llm.base import Sampling
    from cascade_rl.llm.local import LocalGenerator

    torch.set_num_threads(threads)
    generator = LocalGenerator(MODEL, dtype=dtype, batch_size=batch)
    questions = []
    with open(DATA / "gsm8k" / "test.jsonl") as handle:
        for line in handle:
            questions.append([{"role": "user", "content": json.loads(line)["question"]}])
            if len(questions) == args.sample_prompts:
                break
    torch.manual_seed(0)
    started = time.perf_counter()
    responses = generator.generate_batch(questions, Sampling(temperature=0.6, top_p=0.95, max_tokens=args.tokens))
    seconds = time.perf_counter() - started
    tokens = sum(len(generator.tokenizer(r[0], add_special_tokens=False)["input_ids"]) for r in responses)
    return {"label": f"{dtype}, {threads} thread(s), batch {batch}", "seconds": seconds,
            "samples_per_s": len(questions) / seconds, "tokens_per_s": tokens / seconds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per setting (the first is not timed)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per GRPO step (4 rollouts each)")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens at most per rollout / sample")
    parser.add_argument("--sample-prompts", type=int, default=96, help="prompts sampled in the sampling benchmark")
    parser.add_argument("--skip-grpo", action="store_true", help="only the sampling benchmark")
    args = parser.parse_args()
    if not (MODEL / "config.json").exists():
        sys.exit(f"{MODEL} is missing: run `make real-model` first")
    if not (DATA / "gsm8k" / "train.jsonl").exists():
        sys.exit(f"{DATA}/gsm8k is missing: set CASCADE_REAL_DATA to the real-data folder")
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    print("== sampling (llm/decode.py), ratio against float32 with 2 threads, batch 32", flush=True)
    samples = [sampling_rate(dtype, threads, batch, args) for dtype, threads, batch in
               (("float32", 2, 32), ("bfloat16", 2, 32), ("bfloat16", 1, 32), ("float32", 1, 32),
                ("bfloat16", 2, 96))]  # fmt: skip
    for row in samples:
        ratio = row["tokens_per_s"] / samples[0]["tokens_per_s"]
        print(
            f"{row['label']:<36} {row['seconds']:7.1f} s  {row['samples_per_s']:5.2f} samples/s  "
            f"{row['tokens_per_s']:6.1f} tokens/s  x{ratio:.2f}",
            flush=True,
        )
    if args.skip_grpo:
        return
    print(f"== GRPO step ({args.prompts} prompts x 4 rollouts, <= {args.tokens} tokens), ratio against the baseline")
    with tempfile.TemporaryDirectory() as folder:
        data = if_rows(Path(folder), args.prompts)
        rows = []
        for setting in SETTINGS:
            rows.append(grpo_step_seconds(*setting, args, data))
            row = rows[-1]
            print(
                f"{row['label']:<42} {row['step']:6.1f} s/step (generation {row['generation']:5.1f} s, "
                f"{row['tokens_per_s']:5.1f} tokens/s)  x{rows[0]['step'] / row['step']:.2f}",
                flush=True,
            )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
