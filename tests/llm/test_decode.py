"""The local sampling loop (llm/decode.py) against ``transformers``' own ``generate`` and warpers."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from cascade_rl.llm.decode import decode, install_decoder, pick_tokens


@pytest.fixture(scope="module")
def model_and_batch(tiny_checkpoint):
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint).eval()
    texts = ["what is 1 plus 2?", "hi", "a much longer prompt with many more tokens in it than the others", "7 7"]
    inputs = tokenizer(texts, return_tensors="pt", padding=True)
    return model, tokenizer, inputs


def hf_generate(model, inputs, **settings):
    with torch.inference_mode():
        out = model.generate(**inputs, **settings)
    return out


def a_stop_token(model, inputs, tokenizer) -> int:
    """A token greedy decoding emits in some rows after their first token, so those rows stop early."""
    greedy = hf_generate(model, inputs, max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    new = greedy[:, inputs["input_ids"].size(1) :]
    for token in new[:, 1:].flatten().tolist():
        rows = (new[:, 1:] == token).any(-1)
        if 0 < int(rows.sum()) < new.size(0):
            return token
    pytest.skip("greedy decoding of the tiny model repeats one token in every row")


def test_greedy_decode_is_generate_token_for_token(model_and_batch):
    model, tokenizer, inputs = model_and_batch
    stop = a_stop_token(model, inputs, tokenizer)
    expected = hf_generate(
        model, inputs, max_new_tokens=12, do_sample=False, eos_token_id=[stop], pad_token_id=tokenizer.pad_token_id
    )[:, inputs["input_ids"].size(1) :].tolist()
    got = decode(
        model,
        inputs["input_ids"],
        inputs["attention_mask"],
        max_new_tokens=12,
        temperature=0,
        top_p=1.0,
        stop_ids=[stop],
    )
    assert any(len(tokens) < 12 for tokens in got) and any(len(tokens) == 12 for tokens in got)
    for tokens, reference in zip(got, expected):
        assert tokens == reference[: len(tokens)]
        assert tokens[-1] == stop or len(tokens) == 12
        assert all(t == tokenizer.pad_token_id for t in reference[len(tokens) :])


def exact_distribution(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """What ``generate`` samples from: transformers' own warpers, in its order."""
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return torch.softmax(scores, dim=-1)[0]


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p", "scale"),
    [
        (0.6, 0, 0.95, 3.0),  # the evaluation setting: the nucleus within the top 64
        (1.0, 0, 0.95, 0.3),  # a flat distribution: the nucleus needs a full sort
        (1.0, 0, 1.0, 2.0),  # plain sampling
        (1.0, 20, 0.95, 1.0),  # top-k then top-p (IF-RL)
    ],
)
def test_sampled_tokens_follow_the_filtered_distribution(temperature, top_k, top_p, scale):
    torch.manual_seed(1)
    logits = torch.randn(1, 500) * scale
    expected = exact_distribution(logits, temperature, top_k, top_p)
    draws = 100_000
    tokens = pick_tokens(logits.expand(draws, -1), temperature, top_p, top_k)
    observed = torch.bincount(tokens, minlength=logits.size(-1)).float() / draws
    assert observed[expected == 0].sum() == 0  # nothing outside the kept tokens
    support = int((expected > 0).sum())
    total_variation = 0.5 * (observed - expected).abs().sum().item()
    # sampling noise of the total variation is about sqrt(support / (2 pi draws)); a wrong filter is far off
    assert total_variation < 2 * (support / (2 * torch.pi * draws)) ** 0.5 + 0.005


def test_sampling_is_reproducible_from_the_seed(model_and_batch):
    model, tokenizer, inputs = model_and_batch

    def run(seed):
        torch.manual_seed(seed)
        return decode(
            model,
            inputs["input_ids"],
            inputs["attention_mask"],
            max_new_tokens=8,
            temperature=1.0,
            top_p=0.95,
            stop_ids=[tokenizer.eos_token_id],
        )

    assert run(0) == run(0) != run(1)


def test_installed_decoder_returns_generates_layout_and_defers_what_it_does_not_cover(model_and_batch):
    model, tokenizer, inputs = model_and_batch
    stop = a_stop_token(model, inputs, tokenizer)
    covered = GenerationConfig(max_new_tokens=12, do_sample=False, eos_token_id=[stop], pad_token_id=0)
    uncovered = GenerationConfig(
        max_new_tokens=12, do_sample=False, eos_token_id=[stop], pad_token_id=0, repetition_penalty=1.5
    )
    expected = [hf_generate(model, inputs, generation_config=config) for config in (covered, uncovered)]
    patched = AutoModelForCausalLM.from_pretrained(model.name_or_path).eval()
    install_decoder(patched)
    got = [hf_generate(patched, inputs, generation_config=config) for config in (covered, uncovered)]
    assert torch.equal(got[0], expected[0])  # our loop: prompt ids, new ids, pad after the stop
    assert torch.equal(got[1], expected[1])  # repetition penalty: transformers' generate
    assert not torch.equal(expected[0], expected[1])


def test_each_row_is_reported_as_it_ends_while_the_others_are_sampled(model_and_batch):
    """Asynchronous verification (issue 39): a row that emits its stop token is handed over at
    that step, before the rows still running; the rest when the budget is spent."""
    model, tokenizer, inputs = model_and_batch
    stop = a_stop_token(model, inputs, tokenizer)
    reports: list[tuple[int, list[int], int]] = []
    steps = {"count": 0}

    def counting_forward(module, args, kwargs):
        steps["count"] += 1

    hook = model.register_forward_pre_hook(counting_forward, with_kwargs=True)
    try:
        outputs = decode(
            model,
            inputs["input_ids"],
            inputs["attention_mask"],
            max_new_tokens=12,
            temperature=0,
            top_p=1.0,
            stop_ids=[stop],
            on_finished=lambda row, tokens: reports.append((row, list(tokens), steps["count"])),
        )
    finally:
        hook.remove()
    assert sorted(row for row, _, _ in reports) == [0, 1, 2, 3]  # every row once
    assert all(tokens == outputs[row] for row, tokens, _ in reports)
    stopped = [(row, when) for row, tokens, when in reports if tokens[-1] == stop]
    running = [(row, when) for row, tokens, when in reports if tokens[-1] != stop]
    assert stopped and running  # a_stop_token: some rows stop early, others run to the budget
    for row, when in stopped:
        assert when == len(outputs[row])  # reported at the forward pass that sampled its stop token
        assert when < steps["count"]  # ... while the others went on
    assert all(when == steps["count"] == 12 for _, when in running)


def test_the_installed_decoder_reports_rows_only_while_its_hook_is_set(model_and_batch):
    model, tokenizer, inputs = model_and_batch
    patched = AutoModelForCausalLM.from_pretrained(model.name_or_path).eval()
    hooks = install_decoder(patched)
    config = GenerationConfig(max_new_tokens=5, do_sample=False, eos_token_id=[tokenizer.eos_token_id], pad_token_id=0)
    reported: list[int] = []
    hooks.on_finished = lambda row, tokens: reported.append(row)
    hf_generate(patched, inputs, generation_config=config)
    assert sorted(reported) == [0, 1, 2, 3]
    hooks.on_finished = None
    hf_generate(patched, inputs, generation_config=config)
    assert len(reported) == 4
