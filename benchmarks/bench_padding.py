"""The GRPO update of a multi-domain step with each micro-batch cut to its own width
(``learning_rows.attended_span``, the trainer's forward in ``train/trl_backend.py``) against
TRL's padded micro-batches, on the real model, for the CPU at hand.

TRL pads every rollout of a step to the step's longest prompt (left) and longest completion
(right), shuffles the rollouts and slices micro-batches from that batch. In the real
multi-domain stage (``recipes/smollm2-135m-multi-domain.yaml``: 8 prompts x 8 rollouts) one
workplace prompt of ~4,600 tokens (the 27 tool schemas) sits beside MCQA and structured-output
prompts of ~150-300, and most completions end within 130 tokens while a few run to the 1,536
budget. This builds such a step (lengths drawn from those ranges), slices it into micro-batches
of ``--micro-batch`` rollouts as TRL does, and times the forward and backward pass of the first
``--micro-batches`` of them (the paper's token-level loss, float32 weights, bfloat16 autocast
where this CPU computes it fast, gradient checkpointing as the recipe trains) padded and cut. The
gradients of both must be the same (largest difference printed, absolute and over the largest
gradient entry); the ratio is the padded total over the cut total.

Needs the imported model (``make real-model``). Measure with nothing else running (the load
average is printed).

    .venv/bin/python benchmarks/bench_padding.py [--micro-batches 2] [--micro-batch 2]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from bench_update import timed_gradient

from cascade_rl import hardware
from cascade_rl.train.learning_rows import attended_span

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "smollm2-135m-instruct"
WORKPLACE_PROMPT, SHORT_PROMPTS, BUDGET = 4608, (150, 300), 1536


def padded_step(prompts: int, group: int, vocab: int, seed: int = 0) -> dict:
    """A step as TRL hands it to the update: prompt 0 a workplace prompt, the rest short; each
    rollout's completion 10-130 tokens, one in sixteen cut at the budget; padded and shuffled."""
    generator = torch.Generator().manual_seed(seed)
    prompt_lengths = [WORKPLACE_PROMPT] + torch.randint(*SHORT_PROMPTS, (prompts - 1,), generator=generator).tolist()
    rows = prompts * group
    completion_lengths = torch.randint(10, 131, (rows,), generator=generator)
    completion_lengths[torch.rand(rows, generator=generator) < 1 / 16] = BUDGET
    width = int(completion_lengths.max())
    prompt_mask = torch.zeros(rows, WORKPLACE_PROMPT, dtype=torch.long)
    for row in range(rows):
        prompt_mask[row, WORKPLACE_PROMPT - prompt_lengths[row // group] :] = 1
    completion_mask = (torch.arange(width)[None, :] < completion_lengths[:, None]).long()
    order = torch.randperm(rows, generator=generator)  # TRL shuffles the step before slicing it
    return {
        "prompt_ids": torch.randint(100, vocab, (rows, WORKPLACE_PROMPT), generator=generator)[order],
        "prompt_mask": prompt_mask[order],
        "completion_ids": torch.randint(100, vocab, (rows, width), generator=generator)[order],
        "completion_mask": completion_mask[order],
        "advantages": torch.randn(rows, generator=generator)[order],
        "num_items_in_batch": completion_mask.sum(),
    }


def micro_batch(step: dict, start: int, size: int, cut: bool) -> dict:
    rows = {key: value[start : start + size] if value.dim() else value for key, value in step.items()}
    if not cut:
        return rows
    attention = torch.cat([rows["prompt_mask"], rows["completion_mask"]], 1)
    lead, tail = attended_span(attention, rows["completion_ids"].size(1))
    end = rows["completion_ids"].size(1) - tail
    for key in ("prompt_ids", "prompt_mask"):
        rows[key] = rows[key][:, lead:]
    for key in ("completion_ids", "completion_mask"):
        rows[key] = rows[key][:, :end]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step (the recipe's 8)")
    parser.add_argument("--group", type=int, default=8, help="rollouts per prompt (the recipe's 8)")
    parser.add_argument("--micro-batch", type=int, default=2, help="rollouts per micro-batch (the recipe's 2)")
    parser.add_argument("--micro-batches", type=int, default=2, help="micro-batches timed (a padded one takes minutes)")
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(hardware.cpu_threads())
    bf16 = hardware.bf16_is_fast()
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32)
    model.gradient_checkpointing_enable()
    model.train()
    step = padded_step(args.prompts, args.group, model.config.vocab_size)
    starts = range(0, args.micro_batches * args.micro_batch, args.micro_batch)
    padded = [micro_batch(step, start, args.micro_batch, cut=False) for start in starts]
    cut = [micro_batch(step, start, args.micro_batch, cut=True) for start in starts]
    real = sum(int(torch.cat([b["prompt_mask"], b["completion_mask"]], 1).sum()) for b in padded)
    positions = {name: sum(b["prompt_ids"].numel() + b["completion_ids"].numel() for b in batches)
                 for name, batches in (("padded", padded), ("cut", cut))}  # fmt: skip
    print(f"CPU: {hardware.cpu_name()}; bfloat16 autocast: {bf16}; threads {torch.get_num_threads()}; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{args.prompts} x {args.group} rollouts padded to {WORKPLACE_PROMPT} + {step['completion_ids'].size(1)} "
          f"tokens; {len(padded)} micro-batches of {args.micro_batch}: {real} real tokens\n")  # fmt: skip
    print("| micro-batches | positions computed | seconds | largest gradient change | relative |")
    print("|---|---:|---:|---:|---:|")
    timed_gradient(model, cut[:1], bf16)  # warm-up
    cut_seconds, cut_grads = timed_gradient(model, cut, bf16)
    padded_seconds, padded_grads = timed_gradient(model, padded, bf16)
    difference = max(float((a - b).abs().max()) for a, b in zip(padded_grads, cut_grads))
    largest = max(float(g.abs().max()) for g in cut_grads)
    print(f"| TRL's, padded to the step | {positions['padded']} | {padded_seconds:.1f} | | |")
    print(f"| cut to their own width | {positions['cut']} | {cut_seconds:.1f} | {difference:.1e} "
          f"| {difference / largest:.1e} |")  # fmt: skip
    print(f"\nratio: **{padded_seconds / cut_seconds:.1f}x**")


if __name__ == "__main__":
    main()
