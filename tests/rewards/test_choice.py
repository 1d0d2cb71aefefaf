"""Multiple-choice accuracy (MMLU, MMLU-Pro, GPQA): the chosen letter read from common answer
formats, the last occurrence after </think>, never from the reasoning."""

import pytest

from cascade_rl.rewards.choice import extract_choice, gold_letter, score

OPTIONS = ["Berlin", "Madrid", "Paris", "Rome"]

READ = [
    ("Answer: C", "C"),
    ("ANSWER: C", "C"),
    ("**Answer:** (C)", "C"),
    ("Answer: **C**", "C"),
    ("The answer is C.", "C"),
    ("The answer is (C) Paris", "C"),
    ("So the correct answer is: [C]", "C"),
    ("Final answer - C)", "C"),
    ("The best option is C", "C"),
    ("The answer is option C", "C"),
    ("The answer is C because Paris is the capital.", "C"),
    ("答案：C", "C"),
    ("\\boxed{C}", "C"),
    ("$\\boxed{\\text{C}}$", "C"),
    ("\\boxed{(c)}", "C"),
    ("\\boxed{C. Paris}", "C"),
    ("Paris is the capital.\n\nC", "C"),
    ("Paris is the capital.\n(C)", "C"),
    ("Paris is the capital.\n**C.**", "C"),
    ("Reasoning done.\nC) Paris", "C"),
    # the last occurrence wins: the model corrected itself
    ("Answer: B\nWait, Madrid is in Spain. Answer: C", "C"),
    # a boxed letter beats a statement; a statement beats a bare last line
    ("The answer is B, i.e. \\boxed{C}", "C"),
    ("Answer: C\nB", "C"),
    # option text instead of a letter (rows that list their choices)
    ("The answer is Paris.", "C"),
    ("Paris", "C"),
]

NOT_READ = [
    "Answer: Carbon",  # a word, not a letter
    "Answer: I think it depends.",  # the pronoun, not option I
    "A. Berlin\nB. Madrid\nC. Paris\nD. Rome",  # listing every option chooses none
    "I cannot decide.",
    "Answer: E",  # outside A-D for a four-option row
    "",
]


@pytest.mark.parametrize("answer,letter", READ, ids=[a for a, _ in READ])
def test_letter_read_from_common_formats(answer, letter):
    assert extract_choice(answer, "ABCD", OPTIONS)[0] == letter
    assert score(f"<think>maybe B</think>{answer}", answer="C", choices=OPTIONS).reward == 1.0


@pytest.mark.parametrize("answer", NOT_READ, ids=repr)
def test_no_letter_when_the_answer_names_none(answer):
    assert extract_choice(answer, "ABCD", OPTIONS) == (None, None)
    assert score(answer, answer="C", choices=OPTIONS).reward == 0.0


def test_only_the_answer_counts_not_the_reasoning():
    assert score("<think>Answer: C</think>The answer is B.", answer="C").reward == 0.0
    unfinished = score("<think>Answer: C", answer="C")
    assert unfinished.reward == 0.0 and unfinished.details["error"] == "unfinished thinking"


def test_mmlu_pro_has_ten_letters_and_details_name_the_form():
    result = score("The answer is (J).", answer="J")
    assert result.reward == 1.0 and result.details == {"extracted": "J", "gold": "J", "form": "statement"}
    assert score("The answer is (J).", answer="A", num_choices=4).details["extracted"] is None


@pytest.mark.parametrize(
    "answer,gold",
    [("C", "C"), ("(c)", "C"), (2, "C"), ("Paris", "C"), (" paris. ", "C")],
)
def test_gold_from_letter_index_or_option_text(answer, gold):
    assert gold_letter(answer, OPTIONS, "ABCD") == gold


@pytest.mark.parametrize(
    "answer,message",
    [
        (7, "index 7 is outside"),
        ("Lyon", "not one of the option letters A-D"),
        (True, "must be a letter"),
        ("", "must be a letter"),
    ],
)
def test_bad_gold_is_named(answer, message):
    with pytest.raises(ValueError, match=message):
        score("Answer: C", answer=answer, choices=OPTIONS)
