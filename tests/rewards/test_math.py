"""Tests for the Math RL reward (SPEC section 6, Math RL): extraction, equivalence, gating,
language penalty, hard timeout, and scoring through the registry."""

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_rl.rewards.math import (
    _memoised_math_verify,
    extract_boxed,
    math_verify_equal,
    score,
    verifier_pool,
)
from cascade_rl.rewards.math_fast import fast_verdict, normalize_answer
from cascade_rl.scoring import score_file

PATHOLOGICAL = "\\boxed{9^{9^{9^{9}}}}"


@pytest.mark.parametrize(
    "text, expected",
    [
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
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "response, answer",
    [
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
    ],
)
def test_equivalent_answers_score_one(response, answer):
    result = score(response, answer=answer)
    assert result.reward == 1.0, result.details
    assert result.details["method"] in ("exact", "numeric", "math_verify")


@pytest.mark.parametrize(
    "response, answer",
    [
        ("\\boxed{41}", "42"),
        ("\\boxed{0.5}", "\\frac{1}{3}"),
        ("\\boxed{\\frac{2}{3}}", "0.666"),
        ("\\boxed{[1, 2]}", "[1,2)"),
        ("\\boxed{\\{1, 3\\}}", "\\{1,2\\}"),
        ("\\boxed{2\\sqrt{2}}", "\\sqrt{18}"),
        ("\\boxed{x^3}", "x^2"),
    ],
)
def test_wrong_answers_score_zero(response, answer):
    result = score(response, answer=answer)
    assert result.reward == 0.0 and result.details["reason"] == "wrong", result.details


@pytest.mark.parametrize(
    "response, reason",
    [
        ("<think>so it is \\boxed{42}", "unfinished"),
        ("<think>it is \\boxed{42}</think>The answer is 42.", "box_only_in_reasoning"),
        ("The answer is 42.", "no_box"),
        ("\\boxed{ }", "empty_box"),
    ],
)
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
    assert score(in_reasoning, answer="42", prompt=[{"role": "user", "content": "请计算 6 乘以 7"}]).reward == 1.0
    # Greek and math inside LaTeX are not mixing
    assert score("<think>$\\text{面积}$, α</think>\\boxed{42}", answer="42").reward == 1.0


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="'answer'"):
        score("\\boxed{1}", answer=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'answer' is empty"):
        score("\\boxed{1}", answer="  ")
    with pytest.raises(ValueError, match="timeout"):
        score("\\boxed{1}", answer="1", timeout=0)


_CROSS_CHECKS = [
    # plain numbers
    ("1", "1"),
    ("1", "2"),
    ("007", "7"),
    ("+5", "5"),
    ("-0", "0"),
    ("0.5", "1/2"),
    (".5", "\\frac12"),
    ("1.50", "\\frac{3}{2}"),
    ("-\\frac{1}{2}", "\\frac{-1}{2}"),
    ("0.1", "0.2"),
    ("3.0000001", "3"),
    ("0.1234567", "0.1234568"),
    ("0.333333", "1/3"),
    ("0.33", "1/3"),
    ("3/6", "0.5"),
    ("12345678901234567890", "12345678901234567891"),
    ("123456789012.5", "123456789012"),
    ("2.000", "2"),
    ("\\frac{6}{4}", "1.5"),
    ("5", "-5"),
    ("\\dfrac{10}{4}", "2.5"),
    ("1/3", "0.3333333"),
    # constant expressions
    ("\\sqrt{18}", "3\\sqrt{2}"),
    ("2\\sqrt{5}", "\\sqrt{18}"),
    ("\\pi \\cdot 2", "2\\pi"),
    ("2^{10}", "1024"),
    ("2^{11}", "1024"),
    ("\\frac{1}{5}\\sqrt{6}", "\\frac{\\sqrt{6}}{5}"),
    ("\\sqrt{4}", "2"),
    ("-2^2", "-4"),
    ("-2^2", "4"),
    ("10^{20}+1-10^{20}", "1"),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt{3}"),
    ("8\\pi", "7\\pi"),
    # polynomials
    ("3 + x^2", "x^{2}+3"),
    ("x^2 - 3", "x^2 + 3"),
    ("(x+1)^2", "x^2+2x+1"),
    ("(x+1)^2", "x^2+x+1"),
    ("-x^2", "x^2"),
    ("2xy", "2yx"),
    ("\\frac{x}{2}", "\\frac{1}{2}x"),
    ("n^2+n", "n(n+1)"),
    # sets and intervals
    ("\\{11, 3\\}", "\\{3, 11\\}"),
    ("\\{1,1\\}", "\\{1\\}"),
    ("\\{1,2\\}", "\\{1,2,3\\}"),
    ("\\{6, 8\\}", "\\{6, 11\\}"),
    ("(5, 13)", "[5, 13)"),
    ("[2, 9)", "[2, 9)"),
    ("(2, 9)", "(2, 8)"),
    # math-verify's own rewrites, e, ln, infinite intervals
    ("x = 3", "3"),
    ("3", "x=3"),
    ("x=4", "3"),
    ("30^\\circ", "30"),
    ("30^{\\circ}", "40"),
    ("e^{3}", "e^{4}"),
    ("2e", "e+e"),
    ("\\ln 3", "\\ln(3)"),
    ("\\ln 3", "\\ln 4"),
    ("(-\\infty, 3)", "(-\\infty, 3]"),
    ("(3, \\infty)", "(2, \\infty)"),
    # outside the grammar: math-verify decides
    ("2(3)", "6"),
    ("3m", "3"),
    ("2t", "2"),
    ("x", "2x-x"),
    ("\\sqrt{3+2\\sqrt{2}}", "1+\\sqrt{2}"),
]


@pytest.mark.parametrize("prediction, reference", _CROSS_CHECKS)
def test_fast_path_never_contradicts_math_verify(prediction, reference):
    verdict = fast_verdict(prediction, reference)
    if verdict is not None:
        assert verdict[0] == math_verify_equal(prediction, reference)


def test_fast_path_decides_most_cross_checks_and_defers_when_unsure():
    undecided = [(p, r) for p, r in _CROSS_CHECKS if fast_verdict(p, r) is None]
    # decimals within math-verify's 6-decimal rounding, n(n+1) (a possible call), a log identity
    # (math-verify proves those), and the last 5
    assert (
        undecided
        == [
            ("3.0000001", "3"),
            ("0.1234567", "0.1234568"),
            ("0.333333", "1/3"),
            ("123456789012.5", "123456789012"),
            ("1/3", "0.3333333"),
            ("n^2+n", "n(n+1)"),
            ("\\ln 3", "\\ln(3)"),
        ]
        + _CROSS_CHECKS[-5:]
    )
    assert fast_verdict("0.333333", "1/3") is None  # within math-verify's rounding
    assert fast_verdict("50\\%", "0.5") is None
    assert fast_verdict("1,000", "1000") is None
    assert fast_verdict("3", "x=3") == (True, "exact")
    assert fast_verdict("x=x+1", "1") is None  # sympy would not keep that an equation
    assert fast_verdict("\\ln 2x", "\\ln 2 + \\ln x") is None  # ln(2x) to latex2sympy
    assert fast_verdict("2\\ln 3", "\\ln 9") is None  # log identities: math-verify proves them
    assert fast_verdict("2(3)", "6") is None  # a mixed number (5) to latex2sympy
    assert fast_verdict("3m", "3") is None  # "m" is a unit to math-verify's normaliser
    assert fast_verdict("x", "2x-x") is None  # a lone symbol: math-verify compares names
    assert fast_verdict("\\sqrt{3+2\\sqrt{2}}", "1+\\sqrt{2}") is None  # nested root
    assert fast_verdict("1/0", "1/0") == (True, "exact")
    assert fast_verdict("(x+1)^2", "x^2+2x+1") == (True, "numeric")
    assert normalize_answer("$\\dfrac{1}{2} + \\left( x^{2} \\right)$") == "\\frac{1}{2}+(x^2)"
    assert normalize_answer("\\sin x") == "\\sin x" and normalize_answer("1 000") == "1 000"


def _random_expression(rng, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(["2", "3", "7", "x", "y", "n", "\\pi", "m", "t"])
    a, b = _random_expression(rng, depth - 1), _random_expression(rng, depth - 1)
    return rng.choice(
        [
            f"{a}+{b}",
            f"{a}-{b}",
            f"{a}\\cdot {b}",
            f"\\frac{{{a}}}{{{b}}}",
            f"\\sqrt{{{a}}}",
            f"({a})^{{2}}",
            f"-{a}",
            f"{a}{b}",
            f"2({a})",
            f"{b}+{a}",
        ]
    )


def test_fast_path_agrees_with_math_verify_on_random_expressions():
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        reference = _random_expression(rng, 3)
        prediction = rng.choice([reference.replace("+", "+0+", 1), f"1\\cdot {reference}", _random_expression(rng, 3)])
        verdict = fast_verdict(prediction, reference)
        if verdict is not None and checked < 60:
            checked += 1
            assert verdict[0] == math_verify_equal(prediction, reference), (prediction, reference)
    assert checked == 60


def _timed_score(response: str, timeout: float, answer: str):
    start = time.perf_counter()
    result = score(response, answer=answer, timeout=timeout)
    return result, time.perf_counter() - start


@pytest.fixture
def started_verifiers():
    verifier_pool().prestart()  # workers start once per process; not part of a call's deadline


def test_pathological_answer_times_out_on_the_main_thread_and_the_next_call_works(started_verifiers):
    result, seconds = _timed_score(PATHOLOGICAL, 1.0, answer="1")
    assert result.reward == 0.0 and result.details["timeout"] is True
    assert result.details["method"] == "math_verify"
    assert seconds < 1.0 + 20.0  # a hang detector (the machine may be loaded), not a speed test
    assert score("\\boxed{\\sqrt{4}}", answer="2").reward == 1.0
    # the verdict is memoised: the other rollouts of a group that boxed it cost no timeout
    hits = _memoised_math_verify.cache_info().hits
    again, _ = _timed_score(PATHOLOGICAL, 1.0, answer="1")
    assert again.details["timeout"] is True and _memoised_math_verify.cache_info().hits == hits + 1


def test_pathological_answer_times_out_in_threads(started_verifiers):
    with ThreadPoolExecutor(max_workers=3) as pool:
        timed = pool.submit(_timed_score, PATHOLOGICAL, 1.0, "2")
        # math-verify answers (outside the fast path) keep being scored by the other worker
        normal = [
            pool.submit(score, "\\boxed{\\ln 6}", answer=answer) for answer in ("\\ln 2 + \\ln 3", "\\ln 3 + \\ln 2")
        ]
        result, seconds = timed.result(timeout=30)
        assert result.details["timeout"] is True and result.reward == 0.0
        assert seconds < 1.0 + 20.0  # a hang detector (the machine may be loaded), not a speed test
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


_BOX_ALPHABET = st.sampled_from(
    list("ab1 2{}$\\.,\n") + ["\\boxed", "\\fbox", "\\{", "\\}", "\\boxed ", "\\boxed{", "\\frac"]
)


_NO_BOX_ALPHABET = st.sampled_from(list("ab1 2{}$\\.,\n") + ["\\{", "\\}", "\\frac"])


@settings(max_examples=300, deadline=1000)
@given(
    st.lists(_BOX_ALPHABET, max_size=300).map("".join),
    st.text(alphabet="xy12+-^ ", max_size=20),
    st.lists(_NO_BOX_ALPHABET, max_size=100).map("".join),
)
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
