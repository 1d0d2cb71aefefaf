"""Real-model pitfalls, on SmolLM2-135M-Instruct's tokenizer, chat template, stop ids and
architecture with tiny random weights (tests/real_model_assets.py): pad = EOS, the model's own
stop tokens, its generation defaults, prompts longer than a toy's, a 49K-token LM head."""

import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from cascade_rl.llm.base import Sampling
from cascade_rl.llm.decode import decode, install_decoder
from cascade_rl.llm.local import LocalGenerator

QUESTION = [{"role": "user", "content": "Natalia sold clips to 48 of her friends. How many clips did she sell?"}]


@pytest.fixture
def smollm2_copy(smollm2_tiny, tmp_path):
    path = tmp_path / "model"
    shutil.copytree(smollm2_tiny, path)
    return path


def set_generation_config(path, **fields):
    config = json.loads((path / "generation_config.json").read_text())
    config.update(fields)
    (path / "generation_config.json").write_text(json.dumps(config))


def greedy_tokens(path, messages, steps):
    """The model's greedy continuation, token by token, with no stop token at all."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    return decode(model, ids["input_ids"], ids["attention_mask"], max_new_tokens=steps, temperature=0, top_p=1.0,
                  stop_ids=[])[0]  # fmt: skip


def test_the_real_tokenizer_has_pad_equal_to_eos_and_its_own_template(smollm2_tiny):
    tokenizer = AutoTokenizer.from_pretrained(smollm2_tiny)
    assert len(tokenizer) == 49152
    assert tokenizer.pad_token_id == tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>") == 2
    prompt = LocalGenerator(smollm2_tiny).render_prompt([{"role": "user", "content": "hi", "mode": "no_think"}])
    assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert "/no_think" not in prompt and "/think" not in prompt  # a plain template gets no mode flags
    assert prompt.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_the_models_own_stop_tokens_end_a_response(smollm2_copy):
    """A stop id that only the model's generation config names (not the tokenizer's EOS) ends
    local sampling, and the response text stops before it."""
    tokens = greedy_tokens(smollm2_copy, QUESTION, 6)
    stop = tokens[2]
    set_generation_config(smollm2_copy, eos_token_id=[2, stop])
    generator = LocalGenerator(smollm2_copy)
    assert stop in generator.stop_ids and 2 in generator.stop_ids
    [response] = generator.generate(QUESTION, Sampling(temperature=0, max_tokens=6))
    tokenizer = generator.tokenizer
    assert response == tokenizer.decode(tokens[: tokens.index(stop)], skip_special_tokens=False)


def test_the_models_generation_defaults_do_not_leak_into_sampling(smollm2_copy):
    """A checkpoint whose generation config samples hot with a repetition penalty: greedy
    evaluation is still the plain argmax continuation."""
    expected = greedy_tokens(smollm2_copy, QUESTION, 8)
    set_generation_config(smollm2_copy, do_sample=True, temperature=1.7, top_k=3, repetition_penalty=1.8)
    generator = LocalGenerator(smollm2_copy)
    [response] = generator.generate(QUESTION, Sampling(temperature=0, max_tokens=8))
    stops = set(generator.stop_ids)
    cut = next((i for i, t in enumerate(expected) if t in stops), len(expected))
    assert response == generator.tokenizer.decode(expected[:cut], skip_special_tokens=False)


def test_rollouts_with_pad_equal_to_eos_end_at_their_first_eos(smollm2_copy):
    """The trainers' ``generate`` (llm/decode.py) pads finished rows with the pad token, which
    is the EOS token here: a finished row's length is its first EOS, a truncated row has none."""
    tokens = greedy_tokens(smollm2_copy, QUESTION, 6)
    stop = tokens[2]
    assert stop not in tokens[:2]
    model = AutoModelForCausalLM.from_pretrained(smollm2_copy).eval()
    tokenizer = AutoTokenizer.from_pretrained(smollm2_copy)
    tokenizer.padding_side = "left"
    install_decoder(model)
    other = [{"role": "user", "content": "Write a long poem about the sea, the sky and the wind."}]
    texts = [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in (QUESTION, other)]
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    config = GenerationConfig(max_new_tokens=6, do_sample=False, eos_token_id=[stop], pad_token_id=stop)
    out = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], generation_config=config)
    completions = out[:, batch["input_ids"].size(1) :].tolist()
    assert completions[0][:3] == tokens[:3] and set(completions[0][3:]) <= {stop}  # padded with pad = EOS
    first_eos = [row.index(stop) + 1 if stop in row else len(row) for row in completions]
    assert first_eos[0] == 3  # TRL's completion mask: up to and including the first EOS
    assert len(completions[0]) == first_eos[1] or stop not in completions[1]  # the batch is as long as its longest


def test_a_prompt_longer_than_a_toys_is_read_whole_and_only_its_last_logits_computed(smollm2_tiny):
    """A 700-token prompt reaches the model whole, and the prefill computes the 49K-vocabulary
    logits of its last position only (all positions: 700 x 49,152 floats per row)."""
    long_question = [{"role": "user", "content": "Consider the following list. " + "apple banana cherry " * 200}]
    generator = LocalGenerator(smollm2_tiny)
    prompt_ids = generator.tokenizer(generator.render_prompt(long_question), add_special_tokens=False)["input_ids"]
    assert len(prompt_ids) > 600
    seen = []
    head = generator.model.get_output_embeddings()
    hook = head.register_forward_hook(lambda module, args, output: seen.append((args[0].shape, output.shape)))
    generator.model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(("input", kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        generator.generate(long_question, Sampling(temperature=0, max_tokens=2))
    finally:
        hook.remove()
    assert seen[0] == ("input", torch.Size([1, len(prompt_ids)]))  # no truncation
    assert seen[1][1] == torch.Size([1, 1, 49152])  # the LM head ran on one position


def test_training_log_probs_compute_the_vocabulary_for_scored_tokens_only(smollm2_tiny, monkeypatch):
    """The dense LM head (train/trl_backend.py) multiplies the 49K-vocabulary head with the
    completion positions only: with a 500-token prompt and 8 completion tokens per row, the
    logits are 16 x 49,152, not 1,016 x 49,152 (200 MB in float32)."""
    import torch.nn.functional as F

    from cascade_rl.train.trl_backend import dense_log_probs

    model = AutoModelForCausalLM.from_pretrained(smollm2_tiny).eval()
    ids = torch.randint(3, 49152, (2, 508))
    labels = ids.clone()
    labels[:, :500] = -100
    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]
    shapes = []
    linear = F.linear
    monkeypatch.setattr(F, "linear", lambda *a, **k: shapes.append(tuple(linear(*a, **k).shape)) or linear(*a, **k))
    out = dense_log_probs(model.get_output_embeddings(), hidden, labels[:, 1:], 1.0, ("log_probs", "entropy"))
    assert shapes == [(16, 49152)]
    assert out.log_probs.shape == (2, 507) and bool((out.log_probs[:, :499] == 0).all())
