"""Feasibility probe for the toy world (a script, not part of the package; issue 27 moved it out of
``cascade_rl.world``): SFT a tiny model and measure its *sampled* pass rate
per domain (issue 4, "What was measured here"; numbers in docs/toy-world.md).

RL can only move a domain whose sampled pass rate after SFT sits in a learnable band (roughly
20-80%). This probe builds the world, fine-tunes the tiny Qwen3 on ``sft.jsonl`` with TRL's
``SFTTrainer`` (assistant tokens only), then samples every benchmark at the given temperatures
and scores the samples with the real reward scorers::

    .venv/bin/python benchmarks/toy_feasibility.py --out /tmp/probe --threads 2

It prints (and writes to ``<out>/feasibility.json``) the model size, the SFT wall time and
steps, and per benchmark and temperature the pass rate (reward >= 1) and mean reward, with a
per-family breakdown. The throughput of the machine at the time is reported too
(``tokens_per_s``), so runs on a busy machine can be compared with runs on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cascade_rl.world.build import BENCHMARKS, WorldOptions, WorldSizes, build_world


def sft(
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    *,
    out_dir: Path,
    learning_rate: float,
    batch_size: int,
    epochs: float,
    warmup: float,
    seed: int,
) -> dict[str, Any]:
    """One SFT run with TRL (loss on assistant tokens, length-grouped batches)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    dataset = Dataset.from_list(
        [{"messages": r["messages"], "tools": json.dumps(r["tools"]) if r.get("tools") else None} for r in rows]
    )
    config = SFTConfig(
        output_dir=str(out_dir / "trainer"),
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        num_train_epochs=epochs,
        lr_scheduler_type="cosine",
        warmup_steps=warmup,
        weight_decay=0.0,
        logging_steps=50,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        assistant_only_loss=True,
        max_length=2048,
        train_sampling_strategy="group_by_length",
        seed=seed,
        data_seed=seed,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    tokens = next((e["num_tokens"] for e in reversed(trainer.state.log_history) if "num_tokens" in e), None)
    return {
        "seconds": round(seconds, 1),
        "steps": trainer.state.global_step,
        "losses": losses,
        "tokens": tokens,
        "tokens_per_s": round(tokens / seconds) if tokens else None,
    }


def sample(
    model: Any,
    tokenizer: Any,
    rows: Sequence[dict],
    mode: str,
    *,
    temperature: float,
    k: int,
    max_new_tokens: int,
    batch_size: int = 32,
) -> list[list[str]]:
    """``k`` completions per row (prompt rendered in ``mode``; ``tools`` honoured)."""
    import torch

    from cascade_rl.chat import with_mode

    texts = [
        tokenizer.apply_chat_template(
            with_mode(_messages(r["prompt"]), mode), tools=r.get("tools"), tokenize=False, add_generation_prompt=True
        )
        for r in rows
    ]
    jobs = [i for i in sorted(range(len(texts)), key=lambda i: len(texts[i])) for _ in range(k)]
    out: list[list[str]] = [[] for _ in rows]
    tokenizer.padding_side = "left"
    model.eval()
    with torch.no_grad():
        for start in range(0, len(jobs), batch_size):
            batch = jobs[start : start + batch_size]
            encoded = tokenizer([texts[i] for i in batch], return_tensors="pt", padding=True, add_special_tokens=False)
            generated = model.generate(
                **encoded,
                do_sample=True,
                temperature=temperature,
                top_p=1.0,
                top_k=0,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            width = encoded["input_ids"].shape[1]
            for row, index in zip(generated, batch):
                out[index].append(tokenizer.decode(row[width:], skip_special_tokens=True))
    return out


def _messages(prompt: Any) -> list[dict]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def evaluate(
    model: Any,
    tokenizer: Any,
    world: Path,
    *,
    temperatures: Sequence[float],
    k: int,
    max_new_tokens: int,
    limit: int | None,
) -> dict[str, Any]:
    """Pass rate (reward >= 1) and mean reward per verifiable benchmark and temperature."""
    from cascade_rl.rewards.registry import REGISTRY, score_batch

    results: dict[str, Any] = {}
    for name, (file_name, domain, mode, kind) in BENCHMARKS.items():
        if kind != "verify":
            continue
        if domain == "tool_call" and domain not in REGISTRY:
            domain = "cascade_rl.rewards.tool_call:score"
        rows = [json.loads(line) for line in (world / file_name).read_text().splitlines()][:limit]
        for temperature in temperatures:
            samples = sample(model, tokenizer, rows, mode, temperature=temperature, k=k, max_new_tokens=max_new_tokens)
            requests = [{**row, "response": text} for row, texts in zip(rows, samples) for text in texts]
            rewards = [s.reward for s in score_batch(domain, requests, workers=2)]
            families: dict[str, list[float]] = defaultdict(list)
            for request, reward in zip(requests, rewards):
                families[request.get("kind", "all")].append(reward)
            results[f"{name}@T{temperature}"] = {
                "pass": _pass_rate(rewards),
                "mean_reward": round(sum(rewards) / len(rewards), 3),
                "families": {family: _pass_rate(values) for family, values in sorted(families.items())},
                "example": samples[0][0][:300],
            }
    return results


def _pass_rate(rewards: Sequence[float]) -> float:
    return round(sum(r >= 1 for r in rewards) / len(rewards), 3)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--size", action="append", default=[], metavar="FIELD=N", help="WorldSizes override, e.g. --size sft_math=2000"
    )
    parser.add_argument("--swe-prompt", default="agentless", choices=["agentless", "compact"])
    parser.add_argument("--math-style", default="count", choices=["count", "column"])
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=0.05)
    parser.add_argument("--temperature", type=float, action="append", default=None)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="benchmark rows per benchmark")
    parser.add_argument("--max-new-tokens", type=int, default=192)
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoTokenizer

    from cascade_rl.world.model import build_tiny_model, parameter_count

    torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sizes = WorldSizes.from_overrides({k: int(v) for k, v in (s.split("=") for s in args.size)})
    start = time.perf_counter()
    options = WorldOptions(swe_prompt=args.swe_prompt, math_style=args.math_style)
    manifest = build_world(args.out / "world", seed=args.seed, sizes=sizes, options=options)
    world_seconds = time.perf_counter() - start
    tokenizer = AutoTokenizer.from_pretrained(str(args.out / "world" / manifest.tokenizer_dir))
    model = build_tiny_model(
        tokenizer, seed=args.seed, hidden_size=args.hidden, num_layers=args.layers, intermediate_size=3 * args.hidden
    )
    rows = [json.loads(line) for line in (args.out / "world" / "sft.jsonl").read_text().splitlines()]
    report: dict[str, Any] = {
        "parameters": parameter_count(model),
        "world_s": round(world_seconds, 1),
        "sft_rows": len(rows),
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    report["sft"] = sft(
        model,
        tokenizer,
        rows,
        out_dir=args.out,
        learning_rate=args.lr,
        batch_size=args.batch,
        epochs=args.epochs,
        warmup=args.warmup,
        seed=args.seed,
    )
    model.save_pretrained(str(args.out / "sft_model"))
    tokenizer.save_pretrained(str(args.out / "sft_model"))
    print(json.dumps(report, indent=1), flush=True)
    report["eval"] = evaluate(
        model,
        tokenizer,
        args.out / "world",
        temperatures=args.temperature or [0.6, 1.0],
        k=args.k,
        max_new_tokens=args.max_new_tokens,
        limit=args.limit,
    )
    (args.out / "feasibility.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report["eval"], indent=1))
    return report


if __name__ == "__main__":
    main()
