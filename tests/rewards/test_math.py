"""Tests for the Math RL reward (SPEC section 6, Math RL): extraction, equivalence, gating,
language penalty, hard timeout, and scoring through the registry."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_rl.rewards.math import (extract_boxed, fast_verdict, math_verify_equal,
                                     normalize_answer, score, verifier_pool)
from cascade_rl.scoring import score_file

PATHOLOGICAL = "\\boxed{9^{9^{9^{9}}}}"


@pytest.mark.parametrize("text, expected", [
    ("The answer is \\boxed{42}.", "42"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # escaped braces do not close the box
    ("\\boxed{f(x) = \\sqrt{x^{2}+1}}", "f(x) = \\sqrt{x^{2}+1}"),
    ("$\\boxed 5$", "5"),
    ("so \\boxed 12.", "12"),
    ("\\fbox{7}", "7"),
    ("\\boxed {3}", "3"),
    ("first \\boxed{1}, then \\fbox{2}, finally \\boxed{3}", "3"),
    ("\\boxed{}", ""),
    ("no box here", None),
    ("a cut-off box \\boxed{12", None),
    ("\\boxed{1} and a cut-off \\boxed{2", None),  # the last box decides, even malformed
    ("\\boxeddot{4}", None),  # another command
    ("\\boxed", None),
])
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize("response, answer", [
    ("\\boxed{42}", "42"),
    ("\\boxed{42}", 42),
    ("<think>6*7</think>The answer is $\\boxed{42}$.", "42"),
    ("\\boxed{0.5}", "\\frac{1}{2}"),
    ("\\boxed{\\frac{1}{2}}", "0.5"),
    ("\\boxed{1/2}", "\\dfrac12"),
    ("\\boxed{\\dfrac{3}{4}}", "$\\frac{3}{4}$"),
    ("\\boxed{x^2}", "$x^2$"),
    ("\\boxed{\\left( 1, 2 \\right)}", "(1,2)"),
    ("\\boxed{\\{2, 1\\}}", "\\{1,2\\}"),  # set order
    ("\\boxed{[1, 2)}", "[1,2)"),  # interval
    ("\\boxed{3\\sqrt{2}}", "\\sqrt{18}"),
    ("\\boxed{x = 3}", "3"),
    ("\\boxed{0.333333}", "\\frac{1}{3}"),  # math-verify's 6-decimal tolerance
    ("\\boxed{12}", "\\boxed{12}"),  # a boxed ground truth
])
def test_equivalent_answers_score_one(response, answer):
    result = score(response, answer=answer)
    assert result.reward == 1.0, result.details
    assert result.details["method"] in ("exact", "numeric", "math_verify")


@pytest.mark.parametrize("response, answer", [
    ("\\boxed{41}", "42"),
    ("\\boxed{0.5}", "\\frac{1}{3}"),
    ("\\boxed{\\frac{2}{3}}", "0.666"),
    ("\\boxed{[1, 2]}", "[1,2)"),
    ("\\boxed{\\{1, 3\\}}", "\\{1,2\\}"),
    ("\\boxed{2\\sqrt{2}}", "\\sqrt{18}"),
    ("\\boxed{x^3}", "x^2"),
])
def test_wrong_answers_score_zero(response, answer):
    result = score(response, answer=answer)
    assert result.reward == 0.0 and result.details["reason"] == "wrong", result.details


@pytest.mark.parametrize("response, reason", [
    ("<think>so it is \\boxed{42}", "unfinished"),
    ("<think>it is \\boxed{42}</think>The answer is 42.", "box_only_in_reasoning"),
    ("The answer is 42.", "no_box"),
    ("\\boxed{ }", "empty_box"),
])
def test_answers_outside_the_final_box_score_zero(response, reason):
    result = score(response, answer="42")
    assert result.reward == 0.0 and result.details["reason"] == reason


def test_language_mixing_anywhere_gets_the_penalty():
    in_reasoning = "<think>先算 6*7</think>\\boxed{42}"
    result = score(in_reasoning, answer="42")
    assert result.reward == -1.0
    assert result.details["language_mixing"] and result.details["mixing_scripts"] == {"Han": 2}
    assert score("\\boxed{42} 答案", answer="42").reward == -1.0
    assert score(in_reasoning, answer="42", language_penalty=-0.5).reward == -0.5
    assert score(in_reasoning, answer="42", mixing_min_letters=3).reward == 1.0
    # the prompt sets the allowed script: a Chinese prompt may be answered in Chinese
    assert score(in_reasoning, answer="42", prompt="请计算 6 乘以 7").reward == 1.0
    assert score(in_reasoning, answer="42",
                 prompt=[{"role": "user", "content": "请计算 6 乘以 7"}]).reward == 1.0
    # Greek and math inside LaTeX are not mixing
    assert score("<think>$\\text{面积}$, α</think>\\boxed{42}", answer="42").reward == 1.0


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="'answer'"):
        score("\\boxed{1}", answer=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'answer' is empty"):
        score("\\boxed{1}", answer="  ")
    with pytest.raises(ValueError, match="timeout"):
        score("\\boxed{1}", answer="1", timeout=0)


@pytest.mark.parametrize("prediction, reference", [
    ("1", "1"), ("1", "2"), ("007", "7"), ("+5", "5"), ("-0", "0"), ("0.5", "1/2"),
    (".5", "\\frac12"), ("1.50", "\\frac{3}{2}"), ("-\\frac{1}{2}", "\\frac{-1}{2}"),
    ("0.1", "0.2"), ("3.0000001", "3"), ("0.1234567", "0.1234568"), ("0.333333", "1/3"),
    ("0.33", "1/3"), ("3/6", "0.5"), ("12345678901234567890", "12345678901234567891"),
    ("123456789012.5", "123456789012"), ("2.000", "2"), ("\\frac{6}{4}", "1.5"), ("5", "-5"),
    ("\\dfrac{10}{4}", "2.5"), ("1/3", "0.3333333"),
])
def test_fast_path_never_contradicts_math_verify(prediction, reference):
    verdict = fast_verdict(prediction, reference)
    if verdict is not None:
        assert verdict[0] == math_verify_equal(prediction, reference)


def test_fast_path_defers_when_unsure():
    assert fast_verdict("0.333333", "1/3") is None  # within math-verify's rounding
    assert fast_verdict("\\sqrt{4}", "2") is None
    assert fast_verdict("50\\%", "0.5") is None
    assert fast_verdict("1,000", "1000") is None
    assert fast_verdict("1/0", "1/0") == (True, "exact")
    assert fast_verdict("3", "x=3") is None
    assert normalize_answer("$\\dfrac{1}{2} + \\left( x \\right)$") == "\\frac{1}{2}+(x)"
    assert normalize_answer("\\sin x") == "\\sin x" and normalize_answer("1 000") == "1 000"


def _timed_score(response: str, timeout: float):
    start = time.perf_counter()
    result = score(response, answer="1", timeout=timeout)
    return result, time.perf_counter() - start


def test_pathological_answer_times_out_on_the_main_thread_and_the_next_call_works():
    verifier_pool()  # started on first use; its start-up is outside any deadline
    result, seconds = _timed_score(PATHOLOGICAL, timeout=1.0)
    assert result.reward == 0.0 and result.details["timeout"] is True
    assert result.details["method"] == "math_verify"
    assert seconds < 1.0 + 2.0
    assert score("\\boxed{\\sqrt{4}}", answer="2").reward == 1.0


def test_pathological_answer_times_out_in_threads():
    with ThreadPoolExecutor(max_workers=3) as pool:
        timed = pool.submit(_timed_score, PATHOLOGICAL, 1.0)
        normal = [pool.submit(score, "\\boxed{2\\sqrt{2}}", answer="\\sqrt{8}") for _ in range(2)]
        result, seconds = timed.result(timeout=30)
        assert result.details["timeout"] is True and result.reward == 0.0
        assert seconds < 1.0 + 2.0
        assert [future.result(timeout=30).reward for future in normal] == [1.0, 1.0]
    assert score("\\boxed{\\{2, 1\\}}", answer="\\{1,2\\}").reward == 1.0


def test_registry_scores_a_math_jsonl_file(tmp_path):
    rows = [
        {"domain": "math", "response": "<think>6*7</think>\\boxed{42}", "answer": "42"},
        {"domain": "math", "response": "\\boxed{41}", "answer": "42"},
        {"domain": "math", "response": "<think>never finished \\boxed{42}", "answer": "42"},
        {"domain": "math", "prompt": "What is 6*7?", "response": "答案是 \\boxed{42}", "answer": "42"},
        {"domain": "math", "response": "\\boxed{\\dfrac12}", "answer": 0.5},
        {"domain": "math", "response": "\\boxed{1}"},  # missing answer: reported, not scored
    ]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    report = score_file(source, target, workers=2)
    scored = [json.loads(line) for line in target.read_text().splitlines()]
    assert [row["reward"] for row in scored] == [1.0, 0.0, 0.0, -1.0, 1.0, None]
    assert scored[3]["details"]["mixing_scripts"] == {"Han": 3}
    assert "answer" in scored[5]["details"]["error"]
    assert report.domains["math"].count == 5 and report.domains["math"].errors == 0


_BOX_ALPHABET = st.sampled_from(list("ab1 2{}$\\.,\n") + ["\\boxed", "\\fbox", "\\{", "\\}",
                                                        "\\boxed ", "\\boxed{", "\\frac"])


_NO_BOX_ALPHABET = st.sampled_from(list("ab1 2{}$\\.,\n") + ["\\{", "\\}", "\\frac"])


@settings(max_examples=300, deadline=1000)
@given(st.lists(_BOX_ALPHABET, max_size=300).map("".join),
       st.text(alphabet="xy12+-^ ", max_size=20),
       st.lists(_NO_BOX_ALPHABET, max_size=100).map("".join))
def test_fuzz_extract_boxed(prefix, content, suffix):
    found = extract_boxed(prefix)
    assert found is None or found in prefix
    # whatever came before, a final well-formed box is the one extracted
    assert extract_boxed(f"{prefix}\\boxed{{{content}}}{suffix}") == content


@settings(max_examples=100, deadline=1000)
@given(st.text(max_size=3000))
def test_fuzz_extract_boxed_arbitrary_text(text):
    content = extract_boxed(text)
    assert content is None or content in text


def test_long_inputs_are_fast():
    start = time.perf_counter()
    extract_boxed("\\boxed{" + "{" * 20_000)
    extract_boxed("\\boxed{" * 5_000)
    assert time.perf_counter() - start < 1.0
