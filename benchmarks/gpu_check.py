"""GPU check (issue 8, item 9): the engine on one CUDA GPU in about 5 minutes (projected from its parts on an H200).

1. the shortened tiny cascade (tests/test_demo.py::shortened_tiny_recipe: SFT -> RM -> RLHF ->
   IF-RL -> Math -> Code -> SWE, a few steps each, every toy benchmark after every stage) in
   bf16 on CUDA; it checks that the stages really trained in bf16 (the saved checkpoints' dtype);
2. sampling speed: milliseconds per decoding step of 16 sequences on the model of part 3, the
   project's sampling loop (llm/decode.py) against ``transformers``' ``generate``;
3. one GRPO stage on a randomly initialised Qwen3 of 0.53B parameters (Qwen3-0.6B's widths and
   151,936-token vocabulary, 24 layers; gradient checkpointing on; 4 prompts x 4 rollouts per
   step, 4 micro-batches; generation without vLLM, as on a machine without the ``gpu`` extra),
   printing seconds per step (generation / update) and peak GPU memory. Responses are 1,024
   tokens by default: without vLLM a 4,096-token step had not finished its generation after
   about 5 minutes on an H200 (docs/scale.md), so ``--response-tokens 4096`` is for a machine
   with time to spare.

    make gpu-check                                  # GPU_PYTHON=python3 by default
    python benchmarks/gpu_check.py [--out runs/gpu-check] [--grpo-steps 2] [--response-tokens 1024] [--skip-tiny]
    python benchmarks/gpu_check.py --cpu-smoke      # the same code paths on CPU at toy sizes

It refuses to start (exit status 2, one line) without a CUDA GPU or without a package it needs.
Results: the printed tables and ``<out>/gpu-check.json``.

The GPU machine's Python brings torch (a CUDA build), transformers and accelerate; everything
else comes as wheels, fetched on a machine with network access (same OS, CPU architecture and
Python minor version as the GPU machine; from another platform add ``--python-version 3.X
--platform manylinux_2_28_x86_64 --implementation cp`` to ``pip download``). The pins are the
versions this repository is tested with:

    pip download --dest wheels --only-binary=:all: --no-deps \
        trl==1.16.0 datasets==5.2.0 math-verify==0.9.0 latex2sympy2-extended==1.11.0 \
        antlr4-python3-runtime==4.13.2 unidiff==1.0.1 bm25s==0.3.16 pyarrow==26.0.1 pandas==3.1.1 \
        python-dateutil==4.0.0 six==1.17.0 tzdata==2026.6 dill==0.4.1 multiprocess==0.70.19 \
        xxhash==4.1.0 matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 \
        kiwisolver==1.5.1 pillow==13.0.0 pyparsing==3.3.3 pydantic==2.14.4 pydantic-core==2.50.5 \
        annotated-types==0.8.0 typing-inspection==0.4.5 typer==0.29.2 click==8.5.1 \
        shellingham==1.5.4 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0 \
        httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 anyio==4.16.0 idna==3.20 certifi==2026.10.19.post1 \
        pytest==9.2.0 iniconfig==2.3.1 pluggy==1.7.0   # pytest: the shortened recipe lives in tests/test_demo.py
    pip wheel --wheel-dir wheels --no-deps langdetect==1.0.9      # published as a source archive only
    # datasets 5 needs huggingface-hub >= 1.31 and trl 1.16 transformers >= 4.56.2, accelerate >= 1.10.1:
    # if the GPU machine's are older, carry the tested ones too (torch stays the machine's own):
    pip download --dest wheels --only-binary=:all: --no-deps transformers==5.24.0 accelerate==1.15.0 \
        huggingface-hub==1.31.0 hf-xet tokenizers safetensors

and installed there, next to this checkout (cascade_rl is used from src/, not installed):

    pip install --no-index --find-links wheels wheels/*.whl
    make gpu-check
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_PATHS = [str(ROOT / "src"), str(ROOT / "tests")]  # cascade_rl from this checkout, not installed
sys.path[:0] = IMPORT_PATHS
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [*IMPORT_PATHS, os.environ.get("PYTHONPATH")]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

NEEDED = [
    "torch",
    "transformers",
    "accelerate",
    "trl",
    "datasets",
    "math_verify",
    "unidiff",
    "pydantic",
    "yaml",
    "typer",
    "rich",
    "matplotlib",
    "langdetect",
    "bm25s",
    "httpx",
    "jinja2",
    "pytest",
]
RESPONSE_TOKENS = 1024
PROMPTS, ROLLOUTS, MICRO_BATCH = 4, 4, 4
QWEN3_05B = dict(hidden_size=1024, num_layers=24, num_heads=16, num_kv_heads=8, intermediate_size=3072)
SMOKE_MODEL = dict(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128)
VOCAB = 151_936  # Qwen3's: the logits of a 4K-token response cost what they cost on the real model


class Refusal(SystemExit):
    """A one-line reason not to start (exit status 2)."""

    def __init__(self, reason: str):
        print(f"gpu-check: {reason}", file=sys.stderr)
        super().__init__(2)


def preflight(cpu_smoke: bool) -> dict:
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        raise Refusal(f"missing Python packages: {', '.join(missing)} (the wheel list is in this script's docstring)")
    import torch

    if cpu_smoke:
        return {"device": "cpu", "torch": torch.__version__}
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise Refusal(
            f"no CUDA GPU: torch.cuda.is_available() is False (torch {torch.__version__}, {build}); "
            "run it on a GPU machine, or pass --cpu-smoke to exercise the code paths on CPU"
        )
    props = torch.cuda.get_device_properties(0)
    if not torch.cuda.is_bf16_supported():
        raise Refusal(f"{props.name} does not support bfloat16 (this check trains in bf16)")
    return {
        "device": props.name,
        "gpu_memory_gb": round(props.total_memory / 1e9, 1),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def versions() -> dict:
    from importlib.metadata import version

    return {name: version(name) for name in ("torch", "transformers", "accelerate", "trl", "datasets")}


# ----------------------------------------------------------------------------- GPU memory
def reset_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_gb() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {}
    return {
        "peak_allocated_gb": round(torch.cuda.max_memory_allocated() / 1e9, 2),
        "peak_reserved_gb": round(torch.cuda.max_memory_reserved() / 1e9, 2),
    }


# ----------------------------------------------------------------------------- part 1: the tiny cascade
def run_tiny_cascade(out: Path, cpu_smoke: bool) -> dict:
    from test_demo import shortened_tiny_recipe

    from cascade_rl.recipe import parse_recipe
    from cascade_rl.train.cascade import Cascade

    data = shortened_tiny_recipe()
    data["runtime"]["bf16"] = not cpu_smoke
    reset_memory()
    started = time.perf_counter()
    Cascade(parse_recipe(data), out).run()
    wall = time.perf_counter() - started
    report = json.loads((out / "report.json").read_text())
    expected = "float32" if cpu_smoke else "bfloat16"
    trained = sorted(out.glob("0[1-9]-*/model/config.json"))  # not 00-base: the float32 model built from scratch
    dtypes = {path.parent.parent.name: checkpoint_dtype(path.parent) for path in trained}
    if len(dtypes) != len(report["stages"]) or set(dtypes.values()) != {expected}:
        raise SystemExit(f"gpu-check: the stages saved {dtypes}; expected {expected} checkpoints from every stage")
    return {
        "wall_s": round(wall, 1),
        "stages": {s["stage"]: round(s["wall_s"], 1) for s in report["stages"]},
        "checkpoint_dtype": expected,
        **peak_memory_gb(),
    }


def checkpoint_dtype(model_dir: Path) -> str:
    config = json.loads((model_dir / "config.json").read_text())
    return str(config.get("dtype") or config.get("torch_dtype"))


# ----------------------------------------------------------------------------- part 2: 4K-token GRPO
def build_policy(folder: Path, sizes: dict) -> tuple[Path, int]:
    """A randomly initialised Qwen3 with the real vocabulary size, saved with a toy tokenizer
    (sampled ids the tokenizer lacks decode to nothing: responses run to the length limit)."""
    import torch
    from transformers import Qwen3ForCausalLM

    from cascade_rl.chat import render
    from cascade_rl.world.model import tiny_config
    from cascade_rl.world.tokenizer import build_tokenizer

    texts = [
        render([{"role": "user", "content": f"What is {a} + {b}?"}, {"role": "assistant", "content": str(a + b)}])
        for a in range(30)
        for b in range(30)
    ]
    tokenizer = build_tokenizer(texts, vocab_size=512)
    config = tiny_config(tokenizer, max_position_embeddings=8192, **sizes)
    config.vocab_size = VOCAB
    if sizes["hidden_size"] == 1024:
        config.head_dim = 128  # Qwen3-0.6B's attention: 16 heads x 128
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    parameters = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, parameters


def run_long_grpo(out: Path, policy: tuple[Path, int], cpu_smoke: bool, steps: int, response_tokens: int) -> dict:
    from cascade_rl.recipe import parse_recipe
    from cascade_rl.train.cascade import Cascade
    from cascade_rl.train.common import read_metrics

    out.mkdir(parents=True, exist_ok=True)
    model, parameters = policy
    data = out / "rl.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": f"What is {a} + {a}?", "answer": str(2 * a)}) + "\n" for a in range(64))
    )
    response = 32 if cpu_smoke else response_tokens
    recipe = {
        "name": "gpu-check-grpo",
        "seed": 0,
        "model": {"path": str(model), "dtype": "float32" if cpu_smoke else "bfloat16"},
        "runtime": {"bf16": not cpu_smoke, "gradient_checkpointing": True, "save_steps": None, "reward_workers": 2},
        "stages": [
            {
                "kind": "grpo",
                "name": "grpo-long",
                "data": str(data),
                "domain": "tiny_assets:first_char_parity",
                "thinking": "no_think",
                "prompts_per_batch": PROMPTS,
                "rollouts_per_prompt": ROLLOUTS,
                "per_device_batch_size": MICRO_BATCH,
                "learning_rate": 1e-6,
                "temperature": 1.0,
                "curriculum": [{"max_response_length": response, "overlong_filter": False, "max_steps": steps}],
            }
        ],
    }
    reset_memory()
    started = time.perf_counter()
    Cascade(parse_recipe(recipe), out / "run").run()
    wall = time.perf_counter() - started
    metrics = read_metrics(out / "run" / "01-grpo-long" / "metrics.jsonl")
    if len(metrics) != steps:
        raise SystemExit(f"gpu-check: the GRPO stage logged {len(metrics)} steps, expected {steps}")
    timed = metrics[1:] or metrics  # the first step compiles kernels and warms the allocator
    return {
        "parameters": parameters,
        "response_tokens": response,
        "completions_per_step": PROMPTS * ROLLOUTS,
        "wall_s": round(wall, 1),
        "steps": [
            {
                "step": int(m["step"]),
                "s_per_step": round(m["time/step"], 2),
                "generation_s": round(m.get("time/generation", 0.0), 2),
                "update_s": round(m.get("time/update", 0.0), 2),
                "mean_response_tokens": round(m.get("response_length/mean", 0.0)),
            }
            for m in metrics
        ],
        "median_s_per_step": round(statistics.median(m["time/step"] for m in timed), 2),
        **peak_memory_gb(),
    }


# ----------------------------------------------------------------------------- sampling speed
def time_sampling(folder: Path, cpu_smoke: bool, new_tokens: int = 256) -> dict:
    """Milliseconds per decoding step, 16 sequences, of the project's sampling loop (llm/decode.py,
    GRPO rollouts and evaluation without vLLM) and of ``transformers``' ``generate``, on the
    policy of part 3 (no stop token: every sequence runs ``new_tokens``)."""
    import torch
    from transformers import AutoModelForCausalLM

    from cascade_rl.llm.decode import decode

    device, dtype = ("cpu", torch.float32) if cpu_smoke else ("cuda", torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()
    prompts = torch.randint(3, 500, (PROMPTS * ROLLOUTS, 32), device=device)
    mask = torch.ones_like(prompts)
    never = [VOCAB + 1]  # a stop id no step can emit
    new_tokens = 16 if cpu_smoke else new_tokens

    def project_loop():
        decode(model, prompts, mask, max_new_tokens=new_tokens, temperature=1.0, top_p=1.0, stop_ids=never)

    def transformers_generate():
        model.generate(
            prompts,
            attention_mask=mask,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            eos_token_id=never[0],
            pad_token_id=0,
        )

    def timed(run) -> float:
        started = time.perf_counter()
        run()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - started

    timings = {}
    for name, run in (("decode_ms_per_step", project_loop), ("generate_ms_per_step", transformers_generate)):
        timed(run)  # warm-up (and the queue emptied before the timed run)
        timings[name] = round(timed(run) * 1000 / new_tokens, 2)
    return {"sequences": PROMPTS * ROLLOUTS, "new_tokens": new_tokens, **timings}


# ----------------------------------------------------------------------------- output
def print_summary(result: dict) -> None:
    tiny, grpo = result.get("tiny_cascade"), result["grpo"]
    print("\n== gpu-check:", result["environment"].get("device"), json.dumps(result["versions"]))
    if tiny:
        print(
            f"tiny cascade ({tiny['checkpoint_dtype']}): {tiny['wall_s']} s; stages "
            + ", ".join(f"{name} {wall} s" for name, wall in tiny["stages"].items())
            + (f"; peak GPU memory {tiny['peak_allocated_gb']} GB" if "peak_allocated_gb" in tiny else "")
        )
    sampling = result["sampling"]
    print(
        f"sampling, {sampling['sequences']} sequences x {sampling['new_tokens']} tokens: llm/decode.py "
        f"{sampling['decode_ms_per_step']} ms a step, transformers generate {sampling['generate_ms_per_step']} ms"
    )
    print(
        f"GRPO, Qwen3 {grpo['parameters'] / 1e9:.2f}B random init, {grpo['completions_per_step']} completions "
        f"x {grpo['response_tokens']} tokens per step:"
    )
    print(f"{'step':>4} {'s/step':>8} {'generate':>9} {'update':>8} {'tokens':>7}")
    for s in grpo["steps"]:
        row = (s["step"], s["s_per_step"], s["generation_s"], s["update_s"], s["mean_response_tokens"])
        print("{:>4} {:>8} {:>9} {:>8} {:>7}".format(*row))
    print(f"median s/step (after the first): {grpo['median_s_per_step']}")
    if "peak_allocated_gb" in grpo:
        print(f"peak GPU memory: {grpo['peak_allocated_gb']} GB allocated, {grpo['peak_reserved_gb']} GB reserved")
    print(f"total: {result['total_s']} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu-check", help="Output directory (replaced).")
    parser.add_argument("--grpo-steps", type=int, default=2, help="GRPO steps (the first is warm-up).")
    parser.add_argument("--response-tokens", type=int, default=RESPONSE_TOKENS, help="GRPO response length.")
    parser.add_argument("--skip-tiny", action="store_true", help="Leave out part 1, the tiny cascade.")
    parser.add_argument("--cpu-smoke", action="store_true", help="CPU, toy sizes: check the code paths, not the GPU.")
    options = parser.parse_args(argv)
    environment = preflight(options.cpu_smoke)
    import shutil

    shutil.rmtree(options.out, ignore_errors=True)
    started = time.perf_counter()
    result = {"environment": environment, "versions": versions()}
    if not options.skip_tiny:
        result["tiny_cascade"] = run_tiny_cascade(options.out / "tiny", options.cpu_smoke)
    policy = build_policy(options.out / "policy", SMOKE_MODEL if options.cpu_smoke else QWEN3_05B)
    result["sampling"] = time_sampling(policy[0], options.cpu_smoke)
    result["grpo"] = run_long_grpo(
        options.out / "grpo", policy, options.cpu_smoke, options.grpo_steps, options.response_tokens
    )
    result["total_s"] = round(time.perf_counter() - started, 1)
    (options.out / "gpu-check.json").write_text(json.dumps(result, indent=1))
    print_summary(result)


if __name__ == "__main__":
    main()
