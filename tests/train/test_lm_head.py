"""The dense LM head computes what TRL's fused head computes (train/lm_head.py)."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM

from cascade_rl.train.lm_head import dense_supported, install_lm_head, resolve_lm_head

OUTPUTS = ("log_probs", "entropy", "is_top1", "log_sum_sq_probs", "mean_logits")


@pytest.fixture()
def heads(tiny_checkpoint):
    """The same model twice, patched by TRL; the second then given the dense head."""
    from trl.trainer.utils import add_fused_lm_head

    base = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    fused, dense = copy.deepcopy(base), copy.deepcopy(base)
    for model in (fused, dense):
        add_fused_lm_head(model, temperature=0.7, outputs=OUTPUTS)
    assert install_lm_head(dense, "dense", temperature=0.7, outputs=OUTPUTS) == "dense"
    return fused, dense


def batch(vocab: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (4, 24), generator=generator)
    attention = torch.ones_like(ids)
    attention[1, :5] = 0  # a left-padded row
    labels = ids.masked_fill(attention == 0, -100)
    labels[:, :10] = -100  # the prompt is not scored
    labels[2] = -100  # a row with nothing to score
    return ids, attention, labels


def test_dense_head_matches_fused_outputs_and_gradients(heads):
    fused, dense = heads
    ids, attention, labels = batch(fused.config.vocab_size)
    outputs = [m(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True) for m in (fused, dense)]
    for name in (*OUTPUTS, "loss", "label_mask"):
        a, b = (getattr(o, name) for o in outputs)
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert torch.allclose(a.float(), b.float(), atol=1e-5), name
    assert torch.all(outputs[1].log_probs[2] == 0) and torch.all(outputs[1].entropy[:, :9] == 0)
    for out in outputs:
        (out.loss + 0.1 * out.entropy.sum()).backward()
    for (name, a), b in zip(fused.named_parameters(), dense.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-4), name


def test_dense_head_divides_by_the_batch_token_count_it_is_given(heads):
    _, dense = heads
    ids, attention, labels = batch(dense.config.vocab_size)
    own = dense(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True)
    given = dense(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True, num_items_in_batch=100)
    assert torch.isclose(given.loss * 100, own.loss * own.label_mask.sum())


def test_an_all_masked_micro_batch_backpropagates_zero(heads):
    _, dense = heads
    ids, attention, _ = batch(dense.config.vocab_size)
    out = dense(input_ids=ids, attention_mask=attention, labels=torch.full_like(ids, -100), fused_lm_head=True)
    out.loss.backward()
    assert out.loss.item() == 0.0
    assert all(p.grad is None or torch.all(p.grad == 0) for p in dense.parameters())


def test_plain_forward_is_untouched(heads):
    fused, dense = heads
    ids, attention, _ = batch(fused.config.vocab_size)
    plain = [m(input_ids=ids, attention_mask=attention).logits for m in (fused, dense)]
    assert torch.equal(*plain)


def test_choice_resolution_and_unsupported_models_keep_trl_head(tiny_checkpoint):
    from trl.trainer.utils import add_fused_lm_head

    assert resolve_lm_head("auto") == ("fused" if torch.cuda.is_available() else "dense")
    assert resolve_lm_head("fused") == "fused"
    with pytest.raises(ValueError, match="lm_head must be"):
        resolve_lm_head("sparse")
    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    add_fused_lm_head(model)
    trl_forward = model.forward
    assert install_lm_head(model, "fused") == "fused" and model.forward is trl_forward
    model.config.final_logit_softcapping = 30.0  # only TRL's kernel applies soft-capping
    assert not dense_supported(model)
    assert install_lm_head(model, "dense") == "fused" and model.forward is trl_forward
