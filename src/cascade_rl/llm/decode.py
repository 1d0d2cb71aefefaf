"""A sampling loop for local causal LMs that stops spending compute on finished sequences (the
local path of evaluation, SPEC section 9, and of the SWE pipeline, section 7).

``transformers``' ``generate`` keeps every sequence of a batch in the forward pass until the
longest one ends, and samples with a full sort of the vocabulary (top-p) and an exponential draw
per vocabulary entry (``multinomial``). On a CPU, with evaluation responses from a few tokens to
the budget, that is most of the time. :func:`decode` samples the same distribution:

* the prompt is read once (a KV cache; only the last position's logits), then one token per
  step; a sequence that emits a stop token leaves the batch and the cache at once;
* temperature, top-k, then nucleus (top-p) filtering as ``transformers`` defines them (a token
  is kept while the probability of the tokens ranked above it is below ``top_p``; the first
  always is), the nucleus found among the top 64 tokens when they hold it, else by a full sort;
* one uniform draw per sequence inverted through the kept tokens' cumulative probabilities;
* ``temperature == 0`` is greedy decoding (the first maximum, as ``generate`` picks);
* a row is reported as it ends (``on_finished``), so that a trainer scores a rollout while the
  others are still sampled (Code RL's asynchronous verification, SPEC section 6).

``benchmarks/bench_local.py`` measures it against ``generate`` on the same prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: the nucleus is looked for among this many top tokens before a full sort
NUCLEUS_CANDIDATES = 64


def pick_tokens(logits: Any, temperature: float, top_p: float, top_k: int = 0, generator: Any = None) -> Any:
    """One token id per row of ``logits`` ``(batch, vocab)``: temperature, then top-k (``0`` =
    off), then top-p over the renormalised survivors, as ``transformers`` orders its warpers."""
    import torch

    if temperature == 0:
        return logits.argmax(-1)
    scaled = logits.float() / temperature
    order = None
    if 0 < top_k < scaled.size(-1):
        scaled, order = torch.topk(scaled, top_k, dim=-1)
    probs = torch.softmax(scaled, dim=-1)
    if top_p < 1.0 and order is None:
        probs, order = _nucleus_candidates(probs, top_p)
    cumulative = probs.cumsum(-1)
    if top_p < 1.0:
        keep = (cumulative - probs) < top_p
        kept, last = (probs * keep).sum(-1, keepdim=True), keep.sum(-1, keepdim=True) - 1
    else:
        kept, last = cumulative[:, -1:], torch.tensor(probs.size(-1) - 1)
    draw = torch.rand(kept.shape, generator=generator, device=probs.device, dtype=probs.dtype) * kept
    index = torch.minimum(torch.searchsorted(cumulative, draw, right=True), last.to(probs.device))
    return (order.gather(-1, index) if order is not None else index).squeeze(-1)


def _nucleus_candidates(probs: Any, top_p: float) -> tuple[Any, Any]:
    """The most likely tokens, in decreasing order, enough to hold every row's nucleus."""
    import torch

    if probs.size(-1) > NUCLEUS_CANDIDATES:
        values, order = torch.topk(probs, NUCLEUS_CANDIDATES, dim=-1)
        if bool((values.sum(-1) >= top_p).all()):
            return values, order
    return torch.sort(probs, dim=-1, descending=True)


def decode(
    model: Any,
    input_ids: Any,
    attention_mask: Any,
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    stop_ids: Sequence[int],
    top_k: int = 0,
    generator: Any = None,
    on_finished: Callable[[int, list[int]], None] | None = None,
) -> list[list[int]]:
    """New tokens for each row of a left-padded batch, each list ending at its first stop token
    (included) or after ``max_new_tokens``. ``on_finished(row, tokens)`` is called as each row
    ends -- at its stop token, while the other rows are still sampled, or with the budget spent
    -- e.g. to score a rollout as soon as it is complete (``train/verification.py``)."""
    import torch
    from transformers import DynamicCache

    batch = input_ids.size(0)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    if max_new_tokens < 1 or batch == 0:
        return outputs
    stops = torch.tensor(sorted(set(stop_ids)), device=input_ids.device)
    alive = torch.arange(batch, device=input_ids.device)
    mask = attention_mask.long()
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = {_cache_argument(model): _new_cache(model, DynamicCache)}
    step_ids = input_ids
    # no_grad, not inference_mode: under FSDP2 the parameters unsharded here are reused by training
    with torch.no_grad():
        for step in range(max_new_tokens):
            logits = model(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **cache,
            ).logits[:, -1]
            tokens = pick_tokens(logits, temperature, top_p, top_k, generator)
            for row, token in zip(alive.tolist(), tokens.tolist()):
                outputs[row].append(token)
            running = ~torch.isin(tokens, stops)
            last = step == max_new_tokens - 1 or not bool(running.any())
            if on_finished is not None:
                for row, ended in zip(alive.tolist(), (~running).tolist()):
                    if ended or last:
                        on_finished(row, outputs[row])
            if last:
                break
            if not bool(running.all()):
                kept = running.nonzero().squeeze(-1)
                next(iter(cache.values())).batch_select_indices(kept)
                alive, mask, tokens, positions = alive[kept], mask[kept], tokens[kept], positions[kept]
            mask = torch.cat([mask, mask.new_ones(mask.size(0), 1)], dim=-1)
            positions = positions[:, -1:] + 1
            step_ids = tokens.unsqueeze(-1)
    return outputs


def _cache_argument(model: Any) -> str:
    """``cache`` in newer ``transformers`` (``past_key_values`` is deprecated there), else the old name."""
    import inspect

    # the class's forward: trainers wrap the instance's in functions of their own signature; a
    # PEFT model's forward takes **kwargs and passes them to the model it wraps
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"


def _new_cache(model: Any, cache_class: Any) -> Any:
    try:
        return cache_class(config=model.config)  # sliding-window and hybrid layers where the model has them
    except TypeError:  # older transformers
        return cache_class()


#: generation-config fields :func:`install_decoder` reads; any other field set sends the call to ``generate``
_COVERED = {
    "max_new_tokens",
    "do_sample",
    "temperature",
    "top_p",
    "top_k",
    "eos_token_id",
    "pad_token_id",
    "bos_token_id",
    "disable_compile",
    "transformers_version",
    "_from_model_config",
}
_NEUTRAL = {"min_p": None, "repetition_penalty": 1.0, "cache_implementation": None, "num_return_sequences": 1}


@dataclass
class DecoderHooks:
    """What the caller of an installed decoder may watch: ``on_finished(row, tokens)`` is handed
    to :func:`decode` for each ``generate`` call while it is set (None: nothing is reported)."""

    on_finished: Callable[[int, list[int]], None] | None = None


def install_decoder(model: Any) -> DecoderHooks:
    """Make ``model.generate`` (what TRL calls for rollouts without vLLM) run :func:`decode` when
    the request is one it covers -- sampling or greedy with temperature, top-k, top-p, stop ids
    and a token budget -- and ``transformers``' ``generate`` otherwise. The output is the
    ``generate`` layout: prompt ids then new ids, padded with the pad token. Returns the hooks
    the installed ``generate`` reads (a trainer scores each rollout as its row ends)."""
    import types

    original = model.generate
    hooks = DecoderHooks()

    def generate(self, input_ids=None, attention_mask=None, generation_config=None, **kwargs):
        settings = _decode_settings(generation_config) if input_ids is not None and not kwargs else None
        if settings is None:
            return original(
                input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config, **kwargs
            )
        import torch

        pad = settings.pop("pad_token_id")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        tokens = decode(self, input_ids, attention_mask, on_finished=hooks.on_finished, **settings)
        new = input_ids.new_full((len(tokens), max(map(len, tokens), default=0)), pad)
        for row, ids in enumerate(tokens):
            new[row, : len(ids)] = torch.tensor(ids, dtype=new.dtype)
        return torch.cat([input_ids, new], dim=1)

    model.generate = types.MethodType(generate, model)
    return hooks


def _decode_settings(config: Any) -> dict[str, Any] | None:
    """:func:`decode`'s arguments for a ``GenerationConfig``, or None when it asks for more."""
    if config is None or config.max_new_tokens is None:
        return None
    fields = config.to_diff_dict()
    if any(name not in _COVERED and _NEUTRAL.get(name, object()) != value for name, value in fields.items()):
        return None
    stops = config.eos_token_id
    stops = [stops] if isinstance(stops, int) else list(stops or [])
    if not stops:
        return None
    return dict(
        max_new_tokens=config.max_new_tokens,
        temperature=(config.temperature or 1.0) if config.do_sample else 0.0,
        top_p=config.top_p if config.top_p is not None else 1.0,
        top_k=config.top_k or 0,
        stop_ids=stops,
        pad_token_id=config.pad_token_id if config.pad_token_id is not None else stops[0],
    )
