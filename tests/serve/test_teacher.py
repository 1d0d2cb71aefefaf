"""The teacher server's protocol (vLLM's /v1/completions with prompt_logprobs, /tokenize,
/detokenize) against a hand computation on a tiny checkpoint, its refusals, and the client's
reading of responses."""

import pytest
import torch
from fastapi.testclient import TestClient
from transformers import AutoModelForCausalLM

from cascade_rl.llm.pooling import ProtocolError
from cascade_rl.serve.teacher import ScoringJob, TokenScorer, completion_logprobs, create_app


@pytest.fixture(scope="module")
def scorer(tiny_checkpoint):
    return TokenScorer(str(tiny_checkpoint), device="cpu")


@pytest.fixture(scope="module")
def client(scorer):
    with TestClient(create_app(scorer, name="teacher", batch_size=4)) as http:
        yield http


def hand_logprobs(path, ids, temperature=1.0):
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float() / temperature
    return torch.log_softmax(logits, -1)


def test_prompt_logprobs_are_every_tokens_log_probability_given_the_ones_before(client, scorer, tiny_checkpoint):
    ids = scorer.tokenizer.encode("what is 3 plus 4? <think>3+4=7</think>The answer is 7.")
    body = {"model": "teacher", "prompt": ids, "max_tokens": 1, "temperature": 0.7, "prompt_logprobs": 2}
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    positions = choice["prompt_logprobs"]
    assert len(positions) == len(ids) and positions[0] is None
    expected = hand_logprobs(tiny_checkpoint, ids, temperature=0.7)
    for t in range(1, len(ids)):
        entry = positions[t][str(ids[t])]
        assert entry["logprob"] == pytest.approx(expected[t - 1, ids[t]].item(), abs=1e-4)
        assert entry["rank"] == int((expected[t - 1] > expected[t - 1, ids[t]]).sum()) + 1
        assert {e["rank"] for e in positions[t].values()} >= {1, 2}  # the two most likely are reported too
    assert choice["text"] and response.json()["usage"] == {
        "prompt_tokens": len(ids),
        "completion_tokens": 1,
        "total_tokens": len(ids) + 1,
    }
    assert completion_logprobs(response.json(), ids, 5, where="test") == pytest.approx(
        [expected[t - 1, ids[t]].item() for t in range(5, len(ids))], abs=1e-4
    )


def test_requests_arriving_together_share_forward_passes_and_agree_with_single_ones(client, scorer):
    sequences = [scorer.tokenizer.encode(f"what is {a} plus {a}?") for a in range(6)]
    alone = [
        client.post("/v1/completions", json={"prompt": ids, "prompt_logprobs": 0, "max_tokens": 0}) for ids in sequences
    ]
    together = scorer.score_ids([ScoringJob(tuple(ids), 1.0, 0) for ids in sequences], batch_size=6)
    for response, result in zip(alone, together):
        assert response.json()["choices"][0]["text"] == ""  # max_tokens 0: nothing generated
        for a, b in zip(response.json()["choices"][0]["prompt_logprobs"][1:], result["prompt_logprobs"][1:]):
            ((token, entry),) = a.items()
            assert entry["logprob"] == pytest.approx(b[token]["logprob"], abs=1e-5)


def test_tokenize_and_detokenize_answer_as_vllm(client, scorer):
    text = "<|im_start|>user\nwhat is 1 plus 2?<|im_end|>"
    tokens = client.post("/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]
    assert tokens == scorer.tokenizer.encode(text, add_special_tokens=False)
    assert client.post("/detokenize", json={"tokens": tokens}).json()["prompt"] == text
    refused = client.post("/detokenize", json={"tokens": [len(scorer.tokenizer)]})
    assert refused.status_code == 400 and "outside the vocabulary" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"prompt": [1, 2], "max_tokens": 16}, 400, "max_tokens must be 0 or 1"),
        ({"prompt": [1, 10**6], "max_tokens": 1}, 400, "outside the vocabulary"),
        ({"prompt": [], "max_tokens": 1}, 400, "non-empty"),
        ({"prompt": [1, 2], "max_tokens": 1, "temperature": 0}, 400, "temperature"),
        ({"prompt": [1, 2], "max_tokens": 1, "prompt_logprobs": 99}, 400, "prompt_logprobs"),
        ({"model": "other", "prompt": [1, 2], "max_tokens": 1}, 404, "does not exist"),
    ],
)
def test_refused_requests_say_why(client, body, status, message):
    response = client.post("/v1/completions", json=body)
    assert response.status_code == status and message in response.json()["error"]["message"]


def test_a_response_without_the_tokens_log_probability_is_a_protocol_error():
    response = {"choices": [{"prompt_logprobs": [None, {"7": {"logprob": -1.0}}, {"9": {"logprob": -2.0}}]}]}
    assert completion_logprobs(response, [1, 7, 9], 1, where="x") == [-1.0, -2.0]
    with pytest.raises(ProtocolError, match="no log-probability for token 8 at position 2"):
        completion_logprobs(response, [1, 7, 8], 1, where="x")
    with pytest.raises(ProtocolError, match="covers 3 of 4 tokens"):
        completion_logprobs(response, [1, 7, 9, 9], 1, where="x")
