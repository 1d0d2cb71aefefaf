"""`cascade eval` through a served model vs local `generate` (issue 9): the same checkpoint, the
same prompts, the same sampling settings; throughput ratio and the scores of both.

The checkpoint is a tiny Qwen3 wired so that its answers are random in a known way (the chain
models of tests/llm/llm_helpers.py): it thinks ``--think`` tokens, then answers ``Answer: B``,
``C``, ``D`` or ``E`` with probabilities 0.4 / 0.3 / 0.2 / 0.1 before temperature 0.6 and
top-p 0.95. Every row's gold letter is C, so the expected avg@k is known exactly (printed);
all runs must agree with it and with each other within sampling noise (printed).

The served runs go through a real ``transformers serve`` on loopback (started once per mode,
warmed up, not timed) with ``--concurrency`` requests in flight: plain (one request at a
time) and with ``--continuous-batching``; the local run samples with the project's loop
(``llm/decode.py``, ``--batch-size`` sequences per batch). Each runs the library call that ``cascade eval``
makes, timed from start to eval.json. On a CPU with a tiny model this measures the serving
overhead; a GPU server (vLLM, SGLang) is where serving pays.

    .venv/bin/python benchmarks/bench_eval.py [--prompts 32] [--k 8] [--concurrency 8] [--think 64]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "llm"))
from llm_helpers import SURE, build_chain_model, free_port, wait_for_http  # noqa: E402

from cascade_rl.chat import IM_END  # noqa: E402
from cascade_rl.eval.benchmarks import evaluate  # noqa: E402
from cascade_rl.recipe import Benchmark  # noqa: E402

#: the answer's letters (not A: it starts "Answer") and their probabilities at temperature 1
LETTERS = {"B": 0.4, "C": 0.3, "D": 0.2, "E": 0.1}
TEMPERATURE, TOP_P = 0.6, 0.95


#: byte tokens free for the thinking: not used by the answer ("\n", "Answer: " and the letters)
THINKING = "bcdfghijklmopqtuvxyz0123456789FGHIJKLMNOPQRSTUVWXYZ!#%&()*+,-./;<=>?@[]^_{|}~"


def chain(think: int) -> dict:
    """Think ``think`` distinct tokens (deterministic), then ``Answer: <letter>`` at random."""
    if not 1 <= think <= len(THINKING):
        raise SystemExit(f"--think must be 1..{len(THINKING)}")
    steps = ["<think>", *THINKING[:think], "</think>"]
    return {
        "\n": {"<think>": SURE},
        **{a: {b: SURE} for a, b in zip(steps, steps[1:])},
        "</think>": {"A": SURE},
        **{a: {b: SURE} for a, b in zip("Answer", "nswer:")},
        ":": {" ": SURE},
        " ": {letter: SURE + math.log(p) for letter, p in LETTERS.items()},
        **{letter: {IM_END: SURE} for letter in LETTERS},
    }


def expected_accuracy() -> float:
    """P(C) after temperature and top-p (the sampling both backends apply)."""
    tempered = {k: p ** (1 / TEMPERATURE) for k, p in LETTERS.items()}
    total = sum(tempered.values())
    kept, mass = {}, 0.0
    for letter, p in sorted(tempered.items(), key=lambda item: -item[1]):
        if mass >= TOP_P:
            break
        kept[letter], mass = p / total, mass + p / total
    return kept.get("C", 0.0) / sum(kept.values())


def start_server(log: Path, continuous_batching: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    command = [str(Path(sys.executable).with_name("transformers")), "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--device", "cpu", "--log-level", "warning"]
    command += ["--continuous-batching"] if continuous_batching else []
    process = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    wait_for_http(f"http://127.0.0.1:{port}/health", process)
    return process, f"http://127.0.0.1:{port}/v1"


def run(model, bench: Benchmark, out: Path, **options) -> tuple[float, dict, list[dict]]:
    started = time.perf_counter()
    result = evaluate(model, [bench], out, **options)[bench.name]
    seconds = time.perf_counter() - started
    samples = [json.loads(line) for line in (out / "eval-samples" / f"{bench.name}.jsonl").read_text().splitlines()]
    return seconds, result, samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64, help="local sampling: sequences per batch")
    parser.add_argument("--think", type=int, default=64, help="thinking tokens per answer")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    root = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    wiring = chain(args.think)
    model = build_chain_model(root / "model", wiring, hidden=8 * (len(wiring) // 8 + 2))
    rows = [
        {"id": f"q{i}", "prompt": f"Question {i}: which? A) a B) b C) c D) d E) e", "domain": "multiple_choice"}
        | {"answer": "C"}
        for i in range(args.prompts)
    ]
    (root / "bench.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    bench = Benchmark(
        name="mc", data=str(root / "bench.jsonl"), k=args.k, temperature=TEMPERATURE, top_p=TOP_P, max_new_tokens=1024
    )
    runs = {}
    for mode in ("served", "served, continuous batching"):
        process, base_url = start_server(root / f"serve-{len(runs)}.log", continuous_batching="continuous" in mode)
        try:
            served_model = f"{base_url}#{model}"
            evaluate(served_model, [bench.model_copy(update={"k": 1, "limit": 2})], root / f"warm-up-{len(runs)}")
            runs[mode] = run(served_model, bench, root / f"served-{len(runs)}", max_concurrency=args.concurrency)
        finally:
            process.terminate()
            process.wait(timeout=30)
    runs["local"] = run(model, bench, root / "local", batch_size=args.batch_size)
    samples = args.prompts * args.k
    expected = 100 * expected_accuracy()
    noise = 100 * math.sqrt(expected / 100 * (1 - expected / 100) / samples)
    print(f"{args.prompts} prompts x k={args.k} = {samples} samples of {args.think + 12} tokens each")
    print(f"sampling: T {TEMPERATURE}, top-p {TOP_P}; server requests in flight: {args.concurrency}")
    print(f"expected avg@{args.k} {expected:.1f}, sampling noise (s.e. of one run) {noise:.1f} points")
    local_s, local, _ = runs["local"]
    worst = 0.0
    for name, (seconds, result, _) in runs.items():
        worst = max(worst, abs(result["value"] - expected) / noise)
        ratio = local_s / seconds
        print(
            f"{name:30s} {seconds:7.1f} s  {samples / seconds:7.1f} samples/s  x{ratio:5.2f} of local  "
            f"avg@{args.k} {result['value']:5.1f}"
        )
    print(f"largest distance of a run from the expected score: {worst:.1f} standard errors")
    return 0 if worst <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
