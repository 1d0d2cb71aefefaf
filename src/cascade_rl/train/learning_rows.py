"""Only the rollouts that can move the weights go through the update (SPEC section 5).

With the paper's objective (token-level loss over the whole step, no KL term, no entropy
bonus), a rollout whose advantage is zero (its group had no variance) or whose tokens are all
masked (overlong filtering) contributes exactly nothing to the gradient: every term of its loss
is ``A_it * log pi = 0``. It still counts in the step's token total, the loss's denominator,
which TRL computes over the whole generation batch before the update. So dropping such
rollouts from a micro-batch before its forward pass leaves the gradient unchanged and saves
their forward and backward passes: on the real model half or more of the groups often have no
variance (docs/real-model.md).

The drop is exact only under those conditions; :func:`can_drop_idle_rollouts` says when they
hold (token-level loss, no KL). A micro-batch left without a learning rollout keeps one
rollout cut to one token with its mask at zero, so every process still runs a forward and
backward pass (distributed gradient reduction needs them) that adds zero.

Each forward pass also runs at its own chunk's width (:func:`attended_span`): TRL pads every
rollout of a step to the step's longest prompt (left) and longest completion (right), and a chunk
of two short rollouts would otherwise be computed at the width of the step's longest. The columns
cut are padding in every row of the chunk, attended by no token, so every log-probability of a
completion token is the same; on the real model's tool episodes (prompts of up to 4,608 tokens
beside prompts of 200) this is most of an update's positions (docs/real-model.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

# Inputs aligned with the completion tokens (second dimension = completion length; the
# importance ratio only at token level, (rows, 1) at sequence level).
COMPLETION_ALIGNED = (
    "completion_ids",
    "completion_mask",
    "tool_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
)


def can_drop_idle_rollouts(loss_type: str, beta: float, entropy_coef: float, top_entropy_quantile: float) -> bool:
    """Whether dropping zero-advantage / fully masked rollouts leaves the gradient unchanged."""
    return loss_type in ("dapo", "cispo") and beta == 0.0 and entropy_coef == 0.0 and top_entropy_quantile == 1.0


def attended_span(attention_mask: torch.Tensor, logits_to_keep: int) -> tuple[int, int]:
    """``(lead, tail)``: how many columns of ``attention_mask`` (prompt then ``logits_to_keep``
    completion columns) are padding in every row before the first attended token and after the
    last. ``lead`` stays within the prompt and ``tail`` leaves at least one completion column, so
    the cut batch is still a prompt followed by a completion."""
    attended = attention_mask.bool().any(dim=0).nonzero()
    if not attended.numel():
        return 0, 0
    width = attention_mask.size(1)
    lead = min(int(attended[0]), width - logits_to_keep)
    tail = min(width - 1 - int(attended[-1]), logits_to_keep - 1)
    return lead, tail


def learning_mask(inputs: Mapping[str, Any]) -> torch.Tensor:
    """True for the rollouts of a micro-batch that carry gradient: a non-zero advantage and at
    least one unmasked completion token."""
    advantages = inputs["advantages"]
    if advantages.dim() > 1:
        nonzero = (advantages != 0).any(dim=1)
    else:
        nonzero = advantages != 0
    mask = inputs["completion_mask"]
    if "tool_mask" in inputs and inputs["tool_mask"] is not None:
        mask = mask * inputs["tool_mask"]
    return nonzero & (mask.sum(dim=1) > 0)


def learning_rows(inputs: dict[str, Any], rows_everywhere: int | None = None) -> tuple[dict[str, Any], int]:
    """The micro-batch restricted to its learning rollouts, completion padding past the longest
    of them cut, and how many learning rollouts it holds.

    ``rows_everywhere`` (at least this process's count: the most any process keeps) pads the
    micro-batch with idle rollouts up to that count, because TRL gathers per-rollout metrics
    across processes, which needs the same number of rows on each. With no learning rollout
    anywhere, one idle rollout cut to one masked token remains. Per-rollout tensors (first
    dimension = the micro-batch) are indexed; everything else (``num_items_in_batch``, the
    step's token total) passes through untouched."""
    keep = learning_mask(inputs)
    rows = int(keep.sum())
    size = inputs["completion_ids"].size(0)
    target = max(rows, rows_everywhere or 0)
    if target == size:
        return inputs, rows
    idle = (~keep).nonzero(as_tuple=True)[0][: max(target - rows, 0)]
    index = (
        torch.sort(torch.cat([keep.nonzero(as_tuple=True)[0], idle]))[0] if target else torch.zeros(1, dtype=torch.long)
    )
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        is_row_tensor = isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == size
        out[key] = value.index_select(0, index.to(value.device)) if is_row_tensor else value
    if target:
        used = out["completion_mask"].sum(dim=0).nonzero()
        length = int(used.max()) + 1 if used.numel() else 1
    else:
        length = 1
        out["completion_mask"] = torch.zeros_like(out["completion_mask"][:, :1])
        out["prompt_ids"] = out["prompt_ids"][:, -1:]
        out["prompt_mask"] = out["prompt_mask"][:, -1:]
    for key in COMPLETION_ALIGNED:
        value = out.get(key)
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.size(1) > 1:
            out[key] = value[:, :length]
    return out, rows
