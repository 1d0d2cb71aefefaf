"""MCQA as Nemotron-Cascade 2 scores it (NeMo Gym's mcqa server: its fields, modes and verdicts)."""

import pytest

from cascade_rl.rewards.mcqa import check_row, score

OPTIONS = [{"A": "Karyotyping"}, {"B": "Polymerase Chain Reaction (PCR)"}, {"C": "Western blot"}, {"D": "ELISA"}]


def extracted(response, mode=None, **row):
    result = score(response, options=row.pop("options", OPTIONS), expected_answer="B", grading_mode=mode, **row)
    return result.details["extracted"], result.reward


@pytest.mark.parametrize(
    ("response", "letter"),
    [
        ("The answer is \\boxed{B}", "B"),
        ("\\boxed{A} at first, but finally \\boxed{B}", "B"),  # the LAST box
        ("\\boxed{B} ... no, \\boxed{C}", "C"),
        ("Final: \\boxed{ [B] }", "B"),
        ("\\boxed{\\text{B}}", "B"),
        ("\\boxed{\\text{B: Polymerase Chain Reaction (PCR)}}", "B"),
        ("\\boxed{B) PCR}", "B"),
        ("\\boxed{B. PCR}", "B"),
        ("\\boxed{b}", None),  # a lower-case letter is no answer
        ("\\boxed{Polymerase Chain Reaction (PCR)}", None),  # option text needs lenient_boxed
        ("\\boxed{B and C}", None),
        ("\\boxed{E}", None),  # not one of the options
        ("Answer: B", None),
        ("\\boxed{\\textbf{B}}", None),
        ("\\fbox{B}", None),
        ("\\boxed B", None),
        ("\\boxed{B", None),  # never closed
        ("\\boxed{B\\}", "B"),  # every brace counts, escaped or not (NeMo Gym's reader)
        ("<think>\\boxed{B}</think>The answer is A.", None),  # a box in the thinking does not count
        ("<think>so \\boxed{A}</think>\\boxed{B}", "B"),
        ("<think>\\boxed{B}", None),  # unfinished thinking: no answer
    ],
)
def test_the_default_mode_takes_the_single_letter_of_the_last_box(response, letter):
    assert extracted(response) == (letter, 1.0 if letter == "B" else 0.0)


def test_lenient_boxed_reads_one_options_text_inside_the_last_box():
    assert extracted("\\boxed{Polymerase chain   reaction (PCR)}", "lenient_boxed") == ("B", 1.0)
    assert extracted("\\boxed{\\text{Western blot}}", "lenient_boxed")[0] == "C"
    assert extracted("\\boxed{ELISA or Western blot}", "lenient_boxed")[0] is None  # two options match
    assert extracted("Polymerase Chain Reaction (PCR)", "lenient_boxed")[0] is None  # no box


def test_answer_colon_modes():
    assert extracted("Reasoning...\nAnswer: B", "lenient_answer_colon") == ("B", 1.0)
    assert extracted("answer: western blot", "lenient_answer_colon")[0] == "C"
    assert extracted("Answer: A\nAnswer: B", "lenient_answer_colon")[0] == "A"  # the first
    assert extracted("Answer: B because PCR amplifies", "lenient_answer_colon")[0] is None
    assert extracted("**Answer:** B because PCR amplifies", "lenient_answer_colon_md")[0] == "B"
    assert extracted("Answer: A\n**Answer**: B", "lenient_answer_colon_md")[0] == "B"  # the last line
    assert extracted("Answer: A or B", "lenient_answer_colon_md")[0] is None  # a list names none
    assert extracted("Answer: ب", "lenient_answer_colon_md")[0] == "B"  # Arabic letter


def test_a_rows_output_regex_comes_first_and_the_mode_is_the_fallback():
    metadata = {"output_regex": "ANSWER IS\\s*([A-Za-z])"}
    assert extracted("blah\nANSWER IS b", template_metadata=metadata) == ("B", 1.0)
    assert extracted("no match, \\boxed{B}", template_metadata=metadata) == ("B", 1.0)
    assert extracted("ANSWER IS Z", template_metadata=metadata)[0] == "Z"  # trusted even outside the options
    assert extracted("x", template_metadata={"output_regex": "("})[0] is None  # a broken pattern is skipped
    listed = {"output_regex": ["Final Choice:\\s*([A-Z])", "Pick:\\s*(.+)"]}
    assert extracted("Pick: western blot", template_metadata=listed)[0] == "C"


def test_letters_come_from_the_options_keys_with_text():
    options = [{"A": "x"}, {"B": None}, {"AB": "y"}, {"C": "z"}]
    assert extracted("\\boxed{B}", options=options) == (None, 0.0)
    assert extracted("\\boxed{C}", options=options)[0] == "C"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"options": "A: x", "expected_answer": "A"}, "options must be a list"),
        ({"options": OPTIONS, "expected_answer": "F"}, "expected_answer 'F' is not one of the options"),
        ({"options": OPTIONS, "expected_answer": "B", "grading_mode": "loose"}, "grading_mode must be one of"),
        ({"options": OPTIONS, "expected_answer": "B", "template_metadata": "x"}, "template_metadata must be an object"),
    ],
)
def test_rows_that_cannot_be_graded_name_the_field(row, message):
    with pytest.raises(ValueError, match=message):
        check_row(row)
    check_row({"options": OPTIONS, "expected_answer": " b "})


def test_single_answer_scores_a_list_of_different_boxes_zero_and_is_off_by_default():
    listing = "A) Karyotyping: yes \\boxed{A} B) PCR: yes \\boxed{B}"
    assert extracted(listing) == ("B", 1.0)  # NVIDIA's grading: the last box decides
    result = score(listing, options=OPTIONS, expected_answer="B", single_answer=True)
    assert (result.reward, result.details["rejected"]) == (0.0, "several answers")
    assert result.details["answers"] == ["A", "B"]
    # one answer, however often it is repeated or however its box is written, still scores
    for answer in ("\\boxed{B}", "\\boxed{B} so \\boxed{\\text{B}}", "\\boxed{B: PCR} \\boxed{B}"):
        assert score(answer, options=OPTIONS, expected_answer="B", single_answer=True).reward == 1.0
    # a box that names no letter is no second answer; a box in the thinking is not in the answer
    for answer in ("\\boxed{x} \\boxed{B}", "<think>\\boxed{A}</think>\\boxed{B}"):
        assert score(answer, options=OPTIONS, expected_answer="B", single_answer=True).reward == 1.0


@pytest.mark.parametrize(
    ("mode", "listing"),
    [
        ("lenient_boxed", "\\boxed{Karyotyping} \\boxed{Polymerase Chain Reaction (PCR)}"),
        ("lenient_answer_colon", "Answer: B\nAnswer: A"),
        ("lenient_answer_colon_md", "Answer: A\n**Answer:** B"),
    ],
)
def test_single_answer_reads_every_site_of_each_grading_mode(mode, listing):
    assert extracted(listing, mode)[0] in {"A", "B"}
    result = score(listing, options=OPTIONS, expected_answer="B", grading_mode=mode, single_answer=True)
    assert (result.reward, sorted(result.details["answers"])) == (0.0, ["A", "B"])


def test_single_answer_reads_every_match_of_the_rows_own_pattern():
    metadata = {"output_regex": r"Final choice: \(([A-D])\)"}
    listing = "Final choice: (A) ... Final choice: (B)"
    assert extracted(listing, template_metadata=metadata) == ("B", 1.0)
    result = score(listing, options=OPTIONS, expected_answer="B", template_metadata=metadata, single_answer=True)
    assert result.details["answers"] == ["A", "B"] and result.reward == 0.0
