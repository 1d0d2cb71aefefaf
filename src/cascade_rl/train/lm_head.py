"""How the trainers turn hidden states into per-token log-probabilities (the SFT loss of SPEC
section 3 and the GRPO / distillation log-probabilities of sections 4-8).

TRL patches every model it trains with a *fused* LM head (``add_fused_lm_head``): called with
``fused_lm_head=True``, the model returns per-token log-probabilities (and entropies, top-1 hits)
computed tile by tile, without materialising the ``(tokens, vocabulary)`` logits. On a GPU with
a 150K vocabulary and 16K-token sequences that is what makes training fit. Without Triton (on a
CPU) TRL's kernel runs as torch code over every position of the batch, prompt tokens included,
in tiles of 4,096 tokens, and its backward recomputes each tile: on the embedded default's
2,048-token vocabulary an SFT step costs 45% more than plain logits (``benchmarks/bench_lm_head.py``).

:func:`install_lm_head` can replace it with a *dense* head honouring the same contract (the same
``FusedCausalLMOutput`` fields, zero where the label is -100, the same temperature, the same loss
normalisation): the logits of the scored positions only, in one matrix product, and autograd's
backward. ``runtime.lm_head`` chooses: ``fused`` (TRL's), ``dense``, or ``auto`` (dense without a
GPU, fused with one). Models the dense head does not cover (logit soft-capping or scaling, MoE
router losses) keep TRL's head.
"""

from __future__ import annotations

import logging
import types
from typing import Any

log = logging.getLogger(__name__)

#: model-config attributes that change the logits in ways only TRL's kernel reproduces
_LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def resolve_lm_head(choice: str) -> str:
    """``auto`` -> ``dense`` without a GPU, ``fused`` with one; other choices unchanged."""
    if choice not in ("auto", "fused", "dense"):
        raise ValueError(f"lm_head must be auto, fused or dense, got {choice!r}")
    if choice != "auto":
        return choice
    import torch

    return "fused" if torch.cuda.is_available() else "dense"


def dense_supported(model: Any) -> bool:
    """Whether the dense head computes exactly what TRL's would for ``model``."""
    config = model.config.get_text_config()
    if any(getattr(config, name, None) not in (None, 1, 1.0) for name in _LOGIT_TRANSFORMS):
        return False
    return not getattr(config, "output_router_logits", False)


def install_lm_head(
    model: Any, choice: str, *, temperature: float = 1.0, outputs: tuple[str, ...] = ("log_probs",)
) -> str:
    """Give ``model`` (already patched by TRL) the head ``choice`` resolves to; returns the one
    it now has. ``temperature`` and ``outputs`` are the arguments TRL patched it with."""
    if hasattr(model, "get_base_model"):  # PEFT: TRL patched the base model
        model = model.get_base_model()
    if resolve_lm_head(choice) == "fused" or not dense_supported(model):
        return "fused"
    _patch_dense(model, temperature, outputs)
    return "dense"


def _patch_dense(model: Any, temperature: float, outputs: tuple[str, ...]) -> None:
    previous_forward = model.forward  # TRL's: the model's own forward unless fused_lm_head=True

    def dense_forward(
        self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None, **kwargs
    ):
        if not fused_lm_head:
            return previous_forward(
                *args, labels=labels, shift_labels=shift_labels, num_items_in_batch=num_items_in_batch, **kwargs
            )
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state
        if shift_labels is None:
            hidden, labels = hidden[:, :-1], labels[:, 1:]
        else:
            labels = shift_labels
        return dense_log_probs(self.get_output_embeddings(), hidden, labels, temperature, outputs, num_items_in_batch)

    model.forward = types.MethodType(dense_forward, model)


def dense_log_probs(
    lm_head: Any,
    hidden: Any,
    labels: Any,
    temperature: float,
    outputs: tuple[str, ...],
    num_items_in_batch: Any = None,
) -> Any:
    """TRL's ``FusedCausalLMOutput`` from hidden states ``(batch, positions, hidden)`` and their
    next-token ``labels`` (-100 = not scored), with the logits of the scored positions only."""
    import torch
    import torch.nn.functional as F
    from trl.trainer.utils import FusedCausalLMOutput

    weight, bias = lm_head.weight, lm_head.bias
    if hasattr(weight, "full_tensor"):  # FSDP2 shards the head as a DTensor
        weight = weight.full_tensor()
        bias = bias.full_tensor() if bias is not None else None
    labels = labels.to(weight.device)
    mask = labels != -100
    targets = labels[mask]
    logits = F.linear(hidden.to(weight.device)[mask], weight, bias).float() / temperature
    log_softmax = torch.log_softmax(logits, dim=-1)
    fields: dict[str, Any] = {"log_probs": log_softmax.gather(-1, targets.unsqueeze(-1)).squeeze(-1)}
    if "entropy" in outputs:
        fields["entropy"] = -(log_softmax.exp() * log_softmax).sum(-1)
    with torch.no_grad():
        if "log_sum_sq_probs" in outputs:
            fields["log_sum_sq_probs"] = torch.logsumexp(2 * log_softmax, dim=-1)
        if "mean_logits" in outputs:
            fields["mean_logits"] = logits.mean(-1)
        if "is_top1" in outputs:  # argmax takes the first maximum, as TRL's kernel counts ties
            fields["is_top1"] = logits.argmax(-1) == targets
    # masked_scatter keeps an all-masked micro-batch connected to the graph (a zero gradient, no error)
    per_token = {name: value.new_zeros(mask.shape).masked_scatter(mask, value) for name, value in fields.items()}
    count = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
    return FusedCausalLMOutput(loss=-per_token["log_probs"].sum() / count, label_mask=mask, **per_token)
