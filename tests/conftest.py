"""Shared test settings: no network, no hub downloads, deterministic torch on CPU."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A tiny randomly initialised Qwen3 + tokenizer with the Cascade chat template."""
    from tiny_assets import build_checkpoint

    return build_checkpoint(tmp_path_factory.mktemp("tiny") / "model")
