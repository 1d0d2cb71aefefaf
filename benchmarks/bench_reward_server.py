"""Benchmark the served reward model (issue 8, item 7): the RLHF reward scored through
``cascade serve reward-model`` on loopback against the same model loaded in-process (the
baseline), on one GRPO-sized batch.

    .venv/bin/python benchmarks/bench_reward_server.py [--prompts 32] [--rollouts 8] [--hidden 128]
        [--concurrency 16] [--rounds 3]

Builds a tiny Qwen3 sequence-classification reward model (seeded, random weights) on a toy
tokenizer, then scores ``--prompts x --rollouts`` conversations (a prompt and an answer of
40-400 tokens) with ``rewards.preference.score_batch`` twice: ``reward_model`` = the checkpoint
(in-process ``RewardModel``, batches of 8) and ``reward_model`` = the server's URL (one request
per conversation, ``--concurrency`` in flight; the server batches up to 8 per forward pass). Both
run with one torch thread. The two alternate for ``--rounds`` rounds after a warm-up batch (the
machine is shared: medians are reported). Prints both throughputs, the remote/local ratio and
the largest score difference (target < 1e-4; exits 1 above it).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

torch.set_num_threads(1)

from cascade_rl.chat import render  # noqa: E402
from cascade_rl.rewards.preference import score_batch  # noqa: E402
from cascade_rl.world.model import build_tiny_model  # noqa: E402
from cascade_rl.world.tokenizer import build_tokenizer  # noqa: E402

WORDS = "the fox ran over a hill and back while seven birds sang about rivers stones and light".split()
TOLERANCE = 1e-4


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def make_requests(prompts: int, rollouts: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    requests = []
    for p in range(prompts):
        question = f"Question {p}: {sentence(rng, rng.randint(10, 60))}"
        for _ in range(rollouts):
            answer = " ".join(sentence(rng, rng.randint(5, 20)) for _ in range(rng.randint(2, 20)))
            requests.append({"messages": [{"role": "user", "content": question}], "response": answer})
    return requests


def make_reward_model(root: Path, hidden: int) -> Path:
    from transformers import AutoModelForSequenceClassification

    texts = [render([{"role": "user", "content": sentence(random.Random(i), 30)}]) for i in range(200)]
    tokenizer = build_tokenizer(texts, vocab_size=512)
    layers = {"hidden_size": hidden, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2}
    build_tiny_model(tokenizer, intermediate_size=3 * hidden, out_dir=root / "lm", **layers)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(root / "lm", num_labels=1)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 1.0)
    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(root / "rm")
    tokenizer.save_pretrained(root / "rm")
    return root / "rm"


def start_server(path: Path, port: int) -> subprocess.Popen:
    command = [str(Path(sys.executable).with_name("cascade")), "serve", "reward-model", str(path)]
    command += ["--port", str(port), "--device", "cpu", "--batch-size", "8", "--log-level", "warning"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return process
        except OSError:
            time.sleep(0.25)
    process.kill()
    raise SystemExit("the reward-model server did not come up within 120 s")


def timed(requests: list[dict], reward_model: str, **options: int) -> tuple[float, list[float]]:
    start = time.perf_counter()
    scores = score_batch(requests, reward_model=reward_model, check_language=False, **options)
    seconds = time.perf_counter() - start
    errors = [s.details["error"] for s in scores if "error" in s.details]
    if errors:
        raise SystemExit(f"{len(errors)} conversation(s) not scored; first: {errors[0]}")
    return seconds, [s.details["rm_score"] for s in scores]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=18931)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = make_reward_model(Path(tmp), args.hidden)
        requests = make_requests(args.prompts, args.rollouts)
        warm_up = make_requests(2, args.rollouts, seed=1)
        server = start_server(path, args.port)
        try:
            url = f"http://127.0.0.1:{args.port}"
            for reward_model in (str(path), url):
                timed(warm_up, reward_model)
            local_times, remote_times = [], []
            for _ in range(args.rounds):
                seconds, local = timed(requests, str(path))
                local_times.append(seconds)
                seconds, remote = timed(requests, url, max_concurrency=args.concurrency)
                remote_times.append(seconds)
        finally:
            server.terminate()
            server.wait(timeout=30)

    count = len(requests)
    local_seconds, remote_seconds = statistics.median(local_times), statistics.median(remote_times)
    difference = max(abs(a - b) for a, b in zip(local, remote))
    print(
        f"{count} conversations ({args.prompts} prompts x {args.rollouts} rollouts), hidden {args.hidden}, "
        f"{args.concurrency} requests in flight, median of {args.rounds} rounds"
    )
    print(f"in-process RewardModel (baseline): {count / local_seconds:8.1f} conversations/s ({local_seconds:.2f} s)")
    print(f"cascade serve reward-model:        {count / remote_seconds:8.1f} conversations/s ({remote_seconds:.2f} s)")
    print(f"remote / local throughput: {local_seconds / remote_seconds:.2f}x")
    print(f"largest score difference: {difference:.2e} (target < {TOLERANCE:g})")
    return 0 if difference < TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
