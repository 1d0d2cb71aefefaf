"""A tiny offline reward model and a real ``cascade serve reward-model`` process on loopback, for
the reward-model tests (tests/rewards/test_preference*.py, tests/serve/).

The model is a real ``Qwen3ForSequenceClassification`` (hidden size 32, 2 layers, one label) on
the tiny BPE tokenizer of tiny_assets.py with the Cascade chat template; its weights are random
with a score head scaled so that scores spread over a few units. ``max_position_embeddings`` is
8192: longer than the 4,096 tokens the RM used to be cut at.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "llm"))
from llm_helpers import ProxyServer, free_port, wait_for_http  # noqa: E402

__all__ = ["ProxyServer", "build_reward_model", "free_port", "serve_reward_model", "wait_for_http"]

MAX_POSITIONS = 8192


def build_reward_model(path: Path, *, seed: int = 0) -> Path:
    import torch
    from tiny_assets import build_tokenizer
    from transformers import Qwen3Config, Qwen3ForSequenceClassification

    path = Path(path)
    tokenizer = build_tokenizer(path)
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.save_pretrained(path)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=MAX_POSITIONS,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        bos_token_id=None,
    )
    model = Qwen3ForSequenceClassification(config)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 1.0)
    model.save_pretrained(path)
    return path


@contextlib.contextmanager
def serve_reward_model(path: Path, *args: str, log: Path | None = None) -> Iterator[str]:
    """Run ``cascade serve reward-model PATH --device cpu ARGS`` on a free loopback port; yields
    its root URL once ``/health`` answers; stops it afterwards."""
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    command = [str(Path(sys.executable).with_name("cascade")), "serve", "reward-model", str(path)]
    command += ["--port", str(port), "--device", "cpu", "--log-level", "warning", *args]
    with open(log or os.devnull, "w") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/health", process)
        yield url
    except Exception:
        if log is not None:
            print(log.read_text()[-4000:])
        raise
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
