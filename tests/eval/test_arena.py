"""ArenaHard's pieces: verdict labels, game scores from both positions, style counts, and the
baseline-answer files it publishes."""

import json

import pytest

from cascade_rl.eval.arena import (
    JUDGE_SYSTEM,
    game,
    judge_conversations,
    parse_verdict,
    question_row,
    read_baselines,
    style_counts,
)


@pytest.mark.parametrize(
    "judgement, verdict",
    [
        ("My final verdict is tie: [[A=B]]", "A=B"),
        ("Assistant B is significantly better: [[B>>A]]", "B>>A"),
        ("[[A>B]] ... so again [[A>B]]", "A>B"),  # the same label twice is one verdict
        ("[[A>B]] no wait [[B>A]]", None),  # two different labels: no game
        ("no label at all", None),
        ("[[A>>>B]]", None),  # not one of the five
        ("<think>maybe [[A>B]]</think>Final: [[B>A]]", "B>A"),  # a thinking judge: after </think>
        ("<think>[[A>B]] and never finished", None),
    ],
)
def test_verdict_labels(judgement, verdict):
    assert parse_verdict(judgement) == verdict


def test_games_score_the_evaluated_answer_from_either_position():
    # the answer is B in the first game (baseline as A), A in the second
    assert game("B>>A", answer_is_a=False) == (1.0, 3) and game("A>>B", answer_is_a=True) == (1.0, 3)
    assert game("A>B", answer_is_a=False) == (0.0, 1) and game("B>A", answer_is_a=True) == (0.0, 1)
    assert game("A=B", answer_is_a=False) == (0.5, 1) and game(None, answer_is_a=True) is None
    assert game("B>>A", answer_is_a=False, strong_weight=1) == (1.0, 1)


def test_the_two_judge_prompts_swap_the_answers():
    first, second = judge_conversations("Q?", "mine", "theirs")
    assert first[0] == {"role": "system", "content": JUDGE_SYSTEM}
    assert first[1]["content"].index("theirs") < first[1]["content"].index("mine")
    assert second[1]["content"].index("mine") < second[1]["content"].index("theirs")
    assert second[1]["content"].startswith("<|User Prompt|>\nQ?\n\n<|The Start of Assistant A's Answer|>\nmine\n")


def test_style_counts_ignore_code_blocks():
    answer = (
        "# Title\n\nSome **bold** and __also__ text.\n\n1. one\n2. two\n- item\n\n```python\n# not a header\n- x\n```"
    )
    words, headers, lists, bold = style_counts(answer)
    assert (headers, lists, bold) == (1, 3, 2)
    # words and single punctuation marks: # Title Some * * bold * * and __also__ text . 1 . one 2 . two - item
    assert words == 20


def test_baseline_files_in_arenahard_layouts(tmp_path):
    path = tmp_path / "answers.jsonl"
    rows = [
        {"question_id": "a", "choices": [{"index": 0, "turns": [{"content": "v0.1 answer"}]}]},
        {
            "uid": "b",
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": {"answer": "v2"}}],
        },
        {"id": 3, "response": "plain"},
    ]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n\n")
    assert read_baselines(path) == {"a": "v0.1 answer", "b": "v2", "3": "plain"}
    path.write_text(json.dumps({"question_id": "a"}) + "\n")
    with pytest.raises(ValueError, match=r"answers.jsonl:1: expected an id .* and an answer"):
        read_baselines(path)
    with pytest.raises(FileNotFoundError, match="baseline answers not found"):
        read_baselines(tmp_path / "missing.jsonl")


def test_arenahard_question_rows():
    assert question_row({"question_id": "q", "turns": [{"content": "Hi"}]})["prompt"] == [
        {"role": "user", "content": "Hi"}
    ]
    assert question_row({"uid": "u", "prompt": "Hi"}) == {"uid": "u", "prompt": "Hi"}  # v2 rows
    with pytest.raises(ValueError, match="turns is not a list of"):
        question_row({"turns": ["Hi"]})
