"""The GRPO update with idle rollouts left out (``runtime.drop_idle_rollouts``,
``train/learning_rows.py``) against the whole micro-batch, on the real model, for the CPU at hand.

A micro-batch of ``--rollouts`` IF-RL-sized rollouts (a 120-token prompt, completions of 40 to
``--tokens`` tokens, some masked as overlong) goes through the update's forward and backward pass
(the paper's token-level loss, float32 weights, bfloat16 autocast where this CPU computes it
fast, as the real recipe trains) twice per share of learning rollouts: once whole, once without
the rollouts whose advantage is zero or whose tokens are all masked. The gradient of both must be
the same (largest difference printed); the ratio is the whole batch's median seconds over the
dropped one's. The shares default to what the real IF-RL stage measured (``train/learning_share``
11-56% of the rollouts, median about 20%: docs/real-model.md).

Needs the imported model (``make real-model``). Measure with nothing else running (the load
average is printed).

    .venv/bin/python benchmarks/bench_update.py [--rollouts 16] [--tokens 320] [--shares 0.2 0.5 1.0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from cascade_rl import hardware
from cascade_rl.train.learning_rows import learning_rows

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "smollm2-135m-instruct"
PROMPT_TOKENS = 120


def micro_batch(rollouts: int, tokens: int, share: float, vocab: int, seed: int = 0) -> dict:
    """Left-padded prompts, right-padded completions; ``share`` of the rollouts with an advantage,
    a fifth of the others cut at the budget (masked, as the overlong filter does)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(40, tokens + 1, (rollouts,), generator=generator)
    learning = torch.zeros(rollouts, dtype=torch.bool)
    learning[torch.randperm(rollouts, generator=generator)[: round(share * rollouts)]] = True
    mask = (torch.arange(tokens)[None, :] < lengths[:, None]).long()
    overlong = (~learning) & (torch.rand(rollouts, generator=generator) < 0.2)
    mask[overlong] = 0
    advantages = torch.where(learning, torch.randn(rollouts, generator=generator), torch.zeros(rollouts))
    return {
        "prompt_ids": torch.randint(100, vocab, (rollouts, PROMPT_TOKENS), generator=generator),
        "prompt_mask": torch.ones(rollouts, PROMPT_TOKENS, dtype=torch.long),
        "completion_ids": torch.randint(100, vocab, (rollouts, tokens), generator=generator),
        "completion_mask": mask,
        "advantages": advantages,
        "num_items_in_batch": mask.sum(),
    }


def loss(model, inputs: dict, bf16: bool) -> torch.Tensor:
    """The paper's objective: -(1 / all tokens of the step) sum A_i log pi(o_it), as TRL's "dapo"."""
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
    attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
    keep = inputs["completion_ids"].size(1)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        hidden = model.model(input_ids=ids, attention_mask=attention).last_hidden_state[:, -keep - 1 : -1]
        logits = model.lm_head(hidden).float()
    logps = torch.log_softmax(logits, -1).gather(-1, inputs["completion_ids"].unsqueeze(-1)).squeeze(-1)
    mask = inputs["completion_mask"]
    return -(inputs["advantages"][:, None] * logps * mask).sum() / inputs["num_items_in_batch"]


def timed_gradient(model, inputs: dict | list[dict], bf16: bool) -> tuple[float, list[torch.Tensor]]:
    """Seconds of the forward and backward passes of ``inputs`` (one micro-batch or several,
    accumulated) and the gradient they leave."""
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    for micro_batch in inputs if isinstance(inputs, list) else [inputs]:
        loss(model, micro_batch, bf16).backward()
    seconds = time.perf_counter() - start
    return seconds, [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=16, help="rollouts in the micro-batch (the recipe's 16)")
    parser.add_argument("--tokens", type=int, default=320, help="completion budget (the recipe's IF-RL 320)")
    parser.add_argument("--shares", type=float, nargs="+", default=[0.2, 0.5, 1.0], help="shares that learn")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per setting (after one untimed)")
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(hardware.cpu_threads())
    bf16 = hardware.bf16_is_fast()
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32)
    model.train()
    print(f"CPU: {hardware.cpu_name()}; bfloat16 autocast: {bf16}; threads {torch.get_num_threads()}; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{args.rollouts} rollouts, prompt {PROMPT_TOKENS} tokens, completions 40-{args.tokens} tokens\n")
    print("| learning share | whole micro-batch (s) | idle rollouts dropped (s) | ratio | largest gradient change |")
    print("|---:|---:|---:|---:|---:|")
    for share in args.shares:
        inputs = micro_batch(args.rollouts, args.tokens, share, model.config.vocab_size)
        kept, rows = learning_rows(inputs)
        timed_gradient(model, kept, bf16)  # warm-up
        whole, dropped, difference = [], [], 0.0
        for _ in range(args.repeats):
            seconds, whole_grads = timed_gradient(model, inputs, bf16)
            whole.append(seconds)
            seconds, dropped_grads = timed_gradient(model, kept, bf16)
            dropped.append(seconds)
            difference = max(difference, max(float((a - b).abs().max()) for a, b in zip(whole_grads, dropped_grads)))
        a, b = statistics.median(whole), statistics.median(dropped)
        print(f"| {share:.0%} ({rows} of {args.rollouts}) | {a:.2f} | {b:.2f} | **{a / b:.2f}x** | {difference:.1e} |")


if __name__ == "__main__":
    main()
