"""The topic rule of RLHF prompt hygiene (data/topics.py): math, code or other, with its precision
and recall measured on real labelled prompts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cascade_rl.data.topics import classify, parse_topics

REAL_DATA = Path(os.environ.get("CASCADE_REAL_DATA") or Path(__file__).resolve().parents[3] / "shared" / "real-data")

CODEFORCES = """You are given an array $a$ of $n$ integers.
Find the number of pairs $(i, j)$ with $i < j$ and $a_i + a_j$ even.

Input

The first line contains a single integer $t$ ($1 \\le t \\le 10^4$) — the number of test cases.
The first line of each test case contains $n$ ($1 \\le n \\le 2 \\cdot 10^5$).

Output

For each test case, print the answer.
"""
LEETCODE = """Given an integer array nums, return the length of the longest strictly increasing subsequence.

Example 1:

Input: nums = [10,9,2,5,3,7,101,18]
Output: 4

Constraints:

1 <= nums.length <= 2500
"""
TACO = (
    "Chef has N coins.\n\n-----Input-----\nThe first line contains N.\n\n"
    "-----Output-----\nPrint the answer modulo 10^9+7."
)
COMPETITION_MATH = "Let $x$ and $y$ be positive real numbers such that $x + y = 10$. Find the maximum value of $xy^2$."
WORD_PROBLEM = "A baker sells 24 muffins a day at $3 each. How much money does she make in a week?"
CHAT = [
    "Write a poem about the sea in the style of Emily Dickinson.",
    "Can you help me plan a 3-day trip to Lisbon with a budget in mind?",
    "Explain the difference between a virus and a bacterium to a 10 year old.",
    "Draft a polite email to my landlord about a broken heater. Keep it under 100 words.",
    "What are the pros and cons of remote work? Answer in exactly 3 bullet points.",
    "Summarize the plot of Hamlet in two paragraphs.",
    "I feel stressed about my exams next week. Any advice?",
    "Give me 5 names for a coffee shop that sells books, all in lowercase letters.",
    "Translate 'good morning, how are you?' into French and Spanish.",
    "Write a cover letter for a junior data analyst position. Mention SQL and Tableau.",
]


def test_programming_problems_are_code():
    for text in (CODEFORCES, LEETCODE, TACO, "Write a python function to remove odd numbers from a given list."):
        verdict = classify(text)
        assert verdict.topic == "code", (text, verdict)
    # the program's shape decides, though competitive programming is full of mathematics
    assert classify(CODEFORCES).scores["math"] >= 3


def test_math_problems_are_math():
    for text in (COMPETITION_MATH, WORD_PROBLEM, "Solve for x: 3x + 7 = 22.", "Compute $\\frac{1}{2} + \\frac{1}{3}$."):
        verdict = classify(text)
        assert verdict.topic == "math", (text, verdict)
    assert "math: LaTeX" in classify(COMPETITION_MATH).evidence


def test_chat_prompts_and_their_format_counts_are_other():
    for text in CHAT:
        verdict = classify(text)
        assert verdict.topic == "other", (text, verdict)
    # counts of words, paragraphs or keyword uses are format constraints, not quantities
    assert (
        classify("Write a 300+ word essay in 4 paragraphs; use the word sun twice in your response.").topic == "other"
    )


def test_parse_topics():
    assert parse_topics("math, code") == ["math", "code"]
    with pytest.raises(ValueError, match="--drop: expected topics among math, code, other, got 'maths'"):
        parse_topics("maths", "--drop")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.skipif(not (REAL_DATA / "gsm8k").is_dir(), reason="the real public data (shared/real-data) is not here")
def test_precision_and_recall_on_real_labelled_prompts():
    """GSM8K test (math) and MBPP (code) against IFEval and IFBench prompts (other), labelled by
    their source: the figures docs/data-formats.md states. (These are test splits: the rule was
    not fitted to them, only measured.)"""
    labelled = [("math", r["question"]) for r in _rows(REAL_DATA / "gsm8k" / "test.jsonl")]
    labelled += [("code", r["text"]) for r in _rows(REAL_DATA / "mbpp" / "mbpp.jsonl")]
    labelled += [("other", r["prompt"]) for r in _rows(REAL_DATA / "ifeval" / "input_data.jsonl")]
    labelled += [("other", r["prompt"]) for r in _rows(REAL_DATA / "ifbench" / "IFBench_test.jsonl")]
    predicted = [(label, classify(text).topic) for label, text in labelled]
    for topic, floor in (("math", 0.96), ("code", 0.99)):
        hits = sum(label == guess == topic for label, guess in predicted)
        precision = hits / sum(guess == topic for _, guess in predicted)
        recall = hits / sum(label == topic for label, _ in predicted)
        assert precision >= floor and recall >= floor, (topic, precision, recall)
