"""Shared test settings: no network, no hub downloads, deterministic torch on CPU."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
# Tiny models run several times faster on one thread than on two on this 2-core machine, and
# two-thread torch collapses when another process competes for the cores (OpenMP spinning).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Tests sample with the project's own loop unless they ask for vLLM (`use_vllm: true`, or the
# vllm_* fixtures): vLLM's import and start-up cost 10-40 s per process on this machine.
os.environ.setdefault("CASCADE_VLLM", "off")

import torch  # noqa: E402

torch.set_num_threads(1)

# The CLI's consoles read COLUMNS when they are made and keep it: made here, without it, they read
# the width each command's environment gives (CliRunner(env={"COLUMNS": ...})), whatever test
# imported the CLI first in a worker.
_columns = os.environ.pop("COLUMNS", None)
import cascade_rl.cli.common  # noqa: E402, F401

if _columns is not None:
    os.environ["COLUMNS"] = _columns

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A tiny randomly initialised Qwen3 + tokenizer with the Cascade chat template."""
    from tiny_assets import build_checkpoint

    return build_checkpoint(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def vllm_checkpoint(tmp_path_factory):
    """A tiny Qwen3 whose head size (32) vLLM's CPU attention kernels take."""
    from tiny_assets import build_checkpoint

    return build_checkpoint(tmp_path_factory.mktemp("tiny-vllm") / "model", hidden=64, heads=2)


@pytest.fixture(scope="session")
def smollm2_tiny(tmp_path_factory):
    """SmolLM2-135M-Instruct's real tokenizer, chat template and architecture with tiny random
    weights (tests/real_model_assets.py)."""
    from real_model_assets import build_smollm2_tiny

    return build_smollm2_tiny(tmp_path_factory.mktemp("smollm2") / "model")


@pytest.fixture(scope="session")
def smollm2_tiny_vllm(tmp_path_factory):
    """:func:`smollm2_tiny` with a head size vLLM's CPU kernels take (32)."""
    from real_model_assets import build_smollm2_tiny

    return build_smollm2_tiny(tmp_path_factory.mktemp("smollm2-vllm") / "model", heads=2)


@pytest.fixture(scope="session")
def judge_url():
    """The scripted pairwise judge (tests/rewards/genrm_judge.py) behind a real OpenAI-compatible
    server in its own process; its base URL (``.../v1``)."""
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "llm"))
    from llm_helpers import free_port, wait_for_http

    port = free_port()
    process = subprocess.Popen([sys.executable, str(Path(__file__).parent / "rewards" / "genrm_judge.py"), str(port)])
    try:
        wait_for_http(f"http://127.0.0.1:{port}/stats", process)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def early_stopping_checkpoint(tiny_checkpoint, tmp_path_factory):
    """:func:`tiny_checkpoint` whose generation config ends a response at one token in eight (as
    TRL reads its end tokens): random rollouts end at different lengths, so that some finish
    while others are still sampled."""
    import json
    import shutil

    path = tmp_path_factory.mktemp("early-stopping") / "model"
    shutil.copytree(tiny_checkpoint, path)
    config = json.loads((path / "generation_config.json").read_text())
    eos = config["eos_token_id"]
    config["eos_token_id"] = sorted({*(eos if isinstance(eos, list) else [eos]), *range(3, 300, 8)})
    (path / "generation_config.json").write_text(json.dumps(config))
    return path
