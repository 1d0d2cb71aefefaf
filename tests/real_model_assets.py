"""SmolLM2-135M-Instruct with tiny random weights: the real tokenizer (49,152 tokens, pad = EOS),
chat template, stop ids and architecture (Llama, tied embeddings) of the model the real recipe
trains, small enough for `make test` (no download: tests/assets/smollm2-135m/NOTICE.md)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets" / "smollm2-135m"
TOKENIZER_FILES = ("tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def build_smollm2_tiny(path: Path, *, hidden: int = 64, layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    """A checkpoint directory: SmolLM2's tokenizer, template and configuration, with
    ``layers`` layers of width ``hidden`` and random weights (head size ``hidden / heads``:
    vLLM's CPU kernels take 32 and more, ``heads=2``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with gzip.open(ASSETS / "tokenizer.json.gz", "rb") as source, open(path / "tokenizer.json", "wb") as target:
        shutil.copyfileobj(source, target)
    for name in TOKENIZER_FILES:
        shutil.copy(ASSETS / name, path / name)
    config = json.loads((ASSETS / "config.json").read_text())
    config.update(
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=hidden // heads,
        max_position_embeddings=2048,
        # wider than the real 0.02: with tied embeddings, a tiny random model at 0.02 repeats its
        # last input token forever; at 0.1 its greedy continuations vary like a model's
        initializer_range=0.1,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**config))
    model.save_pretrained(path)
    shutil.copy(ASSETS / "generation_config.json", path / "generation_config.json")
    return path
