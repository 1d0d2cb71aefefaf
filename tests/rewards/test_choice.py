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


# issue 19: lower-case letters where the text marks an answer, and "Option C is correct."
READ_LOWER = [
    ("Answer: c", "C"),
    ("answer: c.", "C"),
    ("The answer is (c)", "C"),
    ("The answer is (c) Paris.", "C"),
    ("Answer: option c", "C"),
    ("**Answer:** c", "C"),
    ("The correct answer is c because Paris is the capital.", "C"),
    ("Paris is the capital.\n\nc", "C"),
    ("Paris is the capital.\n(c)", "C"),
    ("Paris is the capital.\nc.", "C"),
    ("Option C is correct.", "C"),
    ("option c is the correct one.", "C"),
    ("Paris is the capital, so Option (C) is the right answer.", "C"),
    # a note naming another option after the answer does not change it
    ("The answer is C.\nNote: option B is correct only for the old map.", "C"),
    ("Answer: c\n\n(Option B is a common mistake.)", "C"),
]

NOT_READ_LOWER = [
    "The answer is a city on the Seine.",  # the article, not option a
    "Answer: a capital city",
    "The answer is e.g. Berlin or Madrid.",  # e.g. is no option
    "Option B is incorrect.",
    "Option B is not correct.",
    "Answer: e",  # outside a-d
    "Answer: i think it depends.",
    "Paris is the capital.\nc) Paris is right",  # a lower-case label with text is no bare label
]


@pytest.mark.parametrize("answer,letter", READ_LOWER, ids=[a for a, _ in READ_LOWER])
def test_lower_case_letters_and_option_statements_are_read(answer, letter):
    assert extract_choice(answer, "ABCD", OPTIONS)[0] == letter
    assert score(f"<think>Answer: b</think>{answer}", answer="C", choices=OPTIONS).reward == 1.0


@pytest.mark.parametrize("answer", NOT_READ_LOWER, ids=repr)
def test_lower_case_letters_outside_answer_contexts_are_not_read(answer):
    assert extract_choice(answer, "ABCD", OPTIONS) == (None, None)


def test_pronoun_i_beside_option_i_and_letters_in_the_thinking():
    assert score("I believe the answer is (I).", answer="I").details["extracted"] == "I"
    assert score("Answer: I", answer="I").reward == 1.0
    assert score("Answer: I think it is (B).", answer="I").details["extracted"] is None
    assert score("Option I is correct.", answer="I").reward == 1.0
    assert score("<think>Answer: c</think>The answer is b.", answer="C", choices=OPTIONS).reward == 0.0
    result = score("Option C is correct.", answer="C", choices=OPTIONS)
    assert result.details["form"] == "option statement"
