"""9-gram decontamination: shared n-grams and contained short texts are caught; scaffolding
is ignored; clean rows pass."""

import pytest

from cascade_rl.world.decontam import Decontaminator, decontaminate, row_text, strip_scaffolding, words

TEST = {"prompt": [{"role": "user", "content": "Ana has 12 red apples and 7 green pears in her small basket."}]}


def train_row(text, answer="ok"):
    return {"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]}


def test_words_ignore_case_and_punctuation():
    assert words("Ana, has 12 APPLES_now!") == ["ana", "has", "12", "apples", "now"]


def test_a_shared_nine_gram_is_caught_even_inside_an_answer():
    shared = train_row("Count fruit.", "So: ana has 12 red apples and 7 green pears, I think.")
    assert decontaminate([shared], [TEST]) == []


def test_eight_shared_words_are_not_a_nine_gram():
    near = train_row("Ben has 12 red apples and 7 green pears; a big box.")
    assert decontaminate([near], [TEST]) == [near]


def test_a_short_test_text_is_caught_when_contained_whole():
    short = {"prompt": "What is 47 + 85?"}
    assert decontaminate([train_row("Quick: what is 47 + 85? Think.")], [short]) == []
    assert decontaminate([train_row("What is 47 + 86?")], [short]) != []


def test_identical_prompt_is_always_caught():
    row = train_row(TEST["prompt"][0]["content"])
    assert decontaminate([row], [TEST]) == []


def test_scaffolding_is_removed_before_counting():
    wrapper = "Please first localize the bug based on the issue statement and then fix it now."
    test = {"prompt": f"{wrapper} Issue: price adds tax twice."}
    train = train_row(f"{wrapper} Issue: count skips the last item.")
    assert decontaminate([train], [test]) == []
    assert decontaminate([train], [test], scaffolding=[wrapper]) == [train]


def test_row_text_reads_every_field_but_tools():
    row = {
        "prompt": [{"role": "user", "content": "a"}],
        "chosen": [{"role": "assistant", "content": "b"}],
        "rejected": [{"role": "assistant", "content": "c"}],
        "problem_statement": "d",
        "files": {"x.py": "e"},
        "tools": [{"function": {"name": "zzz"}}],
        "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": '{"g": 1}'}}]}
        ],
    }
    text = row_text(row)
    assert all(part in text for part in "abcdefg") and "zzz" not in text
    assert strip_scaffolding("x fixed y fixed", ["fixed"]).split() == ["x", "y"]


def test_n_must_be_positive():
    with pytest.raises(ValueError, match="n must be"):
        Decontaminator([], n=0)
