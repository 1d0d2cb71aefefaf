"""The tiny model: a real Qwen3, deterministic in its seed, saved and loaded like any
checkpoint, small."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from cascade_rl.world.model import build_tiny_model, parameter_count
from cascade_rl.world.tokenizer import build_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["What is 4 + 5? <think>4 + 5 = 9</think> The answer is 9."] * 20, vocab_size=320)


def test_same_seed_same_weights_other_seed_differs(tokenizer):
    first, again, other = (build_tiny_model(tokenizer, seed=s, hidden_size=64, num_layers=2) for s in (0, 0, 1))
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values()))
    assert not torch.equal(first.model.embed_tokens.weight, other.model.embed_tokens.weight)


def test_default_model_is_a_small_tied_qwen3(tokenizer):
    model = build_tiny_model(tokenizer)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert 100_000 < parameter_count(model) < 5_000_000
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert model.config.pad_token_id == tokenizer.pad_token_id


def test_save_and_load_round_trip_gives_the_same_logits(tokenizer, tmp_path):
    model = build_tiny_model(tokenizer, seed=3, hidden_size=64, num_layers=2, out_dir=tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path))
    ids = tokenizer("What is 4 + 5?", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, loaded(ids).logits, atol=1e-6)
    generated = loaded.generate(ids, max_new_tokens=5, do_sample=False)
    assert generated.shape[1] <= ids.shape[1] + 5


def test_bad_sizes_name_the_problem(tokenizer):
    with pytest.raises(ValueError, match="divisible by num_heads"):
        build_tiny_model(tokenizer, hidden_size=100, num_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads"):
        build_tiny_model(tokenizer, num_heads=4, num_kv_heads=3)
