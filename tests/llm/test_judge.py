"""YesNoJudge: P(YES) read from next-token logits locally, from logprobs or samples on a server.
The judge model of llm_helpers.py says YES after ``<judgement>`` with probability 3/4."""

import asyncio
import math

import pytest
from llm_helpers import JUDGE_P_YES, ProxyServer

from cascade_rl.llm import LocalGenerator, OpenAICompatGenerator, YesNoJudge
from cascade_rl.llm.judge import yes_probability_from_logprobs

JUDGE_PROMPT = [
    {"role": "system", "content": "Respond only with <judgement>YES</judgement> or <judgement>NO</judgement>."},
    {"role": "user", "content": "Does the patch fix the issue?", "mode": "no_think"},
]


@pytest.fixture(scope="module")
def local_judge_lm(judge_model_path):
    return LocalGenerator(judge_model_path)


def test_local_judge_reads_p_yes_at_the_judgement_position(local_judge_lm):
    assert len(local_judge_lm.tokenizer.encode("YES", add_special_tokens=False)) == 3  # first token stands in
    judge = YesNoJudge(local_judge_lm)
    assert judge.probability_yes(JUDGE_PROMPT) == pytest.approx(JUDGE_P_YES, abs=1e-3)
    # swapping the words asks for P(NO)
    assert YesNoJudge(local_judge_lm, yes="NO", no="YES").probability_yes(JUDGE_PROMPT) == pytest.approx(
        1 - JUDGE_P_YES, abs=1e-3
    )
    assert asyncio.run(judge.aprobability_yes(JUDGE_PROMPT)) == pytest.approx(JUDGE_P_YES, abs=1e-3)


def test_local_judge_from_a_spec_and_bad_words(judge_model_path, local_judge_lm):
    judge = YesNoJudge(f"local:{judge_model_path}")
    assert judge.probability_yes(JUDGE_PROMPT) == pytest.approx(JUDGE_P_YES, abs=1e-3)
    with pytest.raises(ValueError, match="same token"):
        YesNoJudge(local_judge_lm, yes="YES", no="YEP")
    with pytest.raises(TypeError, match="YesNoJudge needs"):
        YesNoJudge(42)  # type: ignore[arg-type]


def test_server_without_logprobs_falls_back_to_counting_samples(transformers_server, judge_model_path):
    with ProxyServer(transformers_server) as proxy:
        backend = OpenAICompatGenerator(proxy.base_url, str(judge_model_path), max_concurrency=8)
        judge = YesNoJudge(backend, samples=32, max_tokens=8)
        probability = judge.probability_yes(JUDGE_PROMPT)
        # 32 draws at P(YES) = 0.75: outside [0.4, 31/32] with probability < 1e-3
        assert 0.4 <= probability <= 31 / 32 and (probability * 32).is_integer()
        assert judge.server_logprobs is False and proxy.bodies[0]["logprobs"] is True
        asked, judge.samples = len(proxy.bodies), 4
        judge.probability_yes(JUDGE_PROMPT)
        assert all("logprobs" not in body for body in proxy.bodies[asked:])  # not asked again


def _entry(token, logprob, top=()):
    return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}


def test_logprobs_of_a_vllm_response_at_their_boundary():
    ln = math.log
    content = [
        _entry("<think>", 0.0),
        _entry("maybe <judgement>", -0.1),
        _entry("NO", -0.1),
        _entry("</think>", 0.0),
        _entry("<jud", 0.0),
        _entry("gement>", 0.0),
        _entry("YES", ln(0.6), [("YES", ln(0.6)), ("NO", ln(0.2)), ("Y", ln(0.1)), ("Sure", ln(0.1))]),
        _entry("</judgement>", 0.0),
    ]
    # the position inside the thinking is skipped; YES-like tokens sum to 0.7 against 0.2 for NO
    assert yes_probability_from_logprobs(content) == pytest.approx(0.7 / 0.9)
    assert yes_probability_from_logprobs(content[:4]) is None  # never reached a judgement
    assert yes_probability_from_logprobs([_entry("<judgement>", 0.0), _entry("Hmm", 0.0)]) is None


def test_judgement_is_read_from_the_answer_only(local_judge_lm):
    judge = YesNoJudge(local_judge_lm)
    assert judge.judgement("<judgement>YES</judgement>") == "YES"
    assert judge.judgement("<think>maybe <judgement>YES</judgement></think><judgement> NO</judgement>") == "NO"
    assert judge.judgement("<think><judgement>YES</judgement>") is None  # unfinished thinking
    assert judge.judgement("I think YES") is None
