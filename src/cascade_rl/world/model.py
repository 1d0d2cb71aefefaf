"""The tiny model of the embedded default: a real Qwen3 built from scratch (issue 4).

:func:`build_tiny_model` makes a ``Qwen3ForCausalLM`` of a few hundred thousand to a few
million parameters on the toy tokenizer (tied embeddings, grouped-query attention), with
weights drawn from ``seed`` so that the same seed gives the same model. It is saved with
``save_pretrained`` and loads back with ``AutoModelForCausalLM.from_pretrained`` like any
checkpoint, so swapping in a real base model is a one-line recipe change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, GenerationConfig, PreTrainedModel, Qwen3Config


def tiny_config(
    tokenizer: Any,
    *,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 384,
    max_position_embeddings: int = 1024,
    rope_theta: float = 10000.0,
) -> Qwen3Config:
    """A Qwen3 config sized for the toy world, with the tokenizer's special-token ids."""
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads})")
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise ValueError("the tokenizer needs an EOS and a PAD token (see cascade_rl.world.tokenizer)")
    return Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        use_cache=True,
    )


def build_tiny_model(
    tokenizer: Any, *, seed: int = 0, out_dir: str | Path | None = None, **sizes: Any
) -> PreTrainedModel:
    """A freshly initialised Qwen3 for ``tokenizer`` (``sizes``: see :func:`tiny_config`),
    deterministic in ``seed``; saved to ``out_dir`` (with the tokenizer) when given."""
    config = tiny_config(tokenizer, **sizes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
    )
    if out_dir is not None:
        model.save_pretrained(str(out_dir))
        tokenizer.save_pretrained(str(out_dir))
    return model


def parameter_count(model: torch.nn.Module) -> int:
    """Trainable parameters, tied weights counted once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
