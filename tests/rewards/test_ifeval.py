"""The IF-RL reward (SPEC section 6): all-must-hold 0/1 reward, strict vs loose, thinking split,
kwargs handling, prompt-based repeat checks, registry / ``cascade score`` integration, speed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cascade_rl.rewards.ifeval import INSTRUCTIONS, build_description, check, score
from cascade_rl.rewards.registry import score_batch
from cascade_rl.scoring import score_file

LOWER_NO_COMMA = ["change_case:english_lowercase", "punctuation:no_comma"]
REQUEST = "Write a limerick about a cat who hates water"
REPEAT_TEXT = build_description("combination:repeat_prompt", {"prompt_to_repeat": REQUEST})


def test_reward_is_one_only_when_every_instruction_holds() -> None:
    both = score("the cat sat on the mat and slept.", instruction_id_list=LOWER_NO_COMMA, kwargs=[{}, {}])
    one = score("the cat sat, then it slept.", instruction_id_list=LOWER_NO_COMMA, kwargs=[{}, {}])
    none = score("The cat sat, then it slept.", instruction_id_list=LOWER_NO_COMMA, kwargs=[{}, {}])
    assert (both.reward, one.reward, none.reward) == (1.0, 0.0, 0.0)
    assert both.details["follow_list"] == [True, True]
    assert one.details["follow_list"] == [True, False]
    assert one.details["failed"] == ["punctuation:no_comma"]
    assert none.details["instruction_id_list"] == LOWER_NO_COMMA
    assert none.details["mode"] == "strict"


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "response"),
    [
        ("detectable_format:json_format", {}, 'Here is the JSON you asked for:\n{"name": "Ada"}'),
        (
            "startend:end_checker",
            {"end_phrase": "Is there anything else?"},
            "The answer is 4. Is there anything else?\nHope this helps.",
        ),
        ("startend:quotation", {}, '**"A bold quoted answer."**'),
        (
            "length_constraints:number_words",
            {"num_words": 5, "relation": "less than"},
            "Sure, here is a very short answer:\nYes indeed.\nLet me know if you need more.",
        ),
    ],
)
def test_loose_accepts_what_strict_rejects(instruction_id: str, kwargs: dict, response: str) -> None:
    strict = score(response, instruction_id_list=[instruction_id], kwargs=[kwargs])
    loose = score(response, instruction_id_list=[instruction_id], kwargs=[kwargs], mode="loose")
    assert strict.reward == 0.0 and loose.reward == 1.0
    assert strict.details["strict"] is False and strict.details["loose"] is True
    assert loose.details["follow_list"] == [True] and loose.details["mode"] == "loose"
    assert loose.details["strict_follow_list"] == [False]


def test_loose_does_not_rescue_a_real_violation() -> None:
    result = score(
        "I like cats, dogs, and birds.\nSo many, many pets.",
        instruction_id_list=["punctuation:no_comma"],
        kwargs=[{}],
        mode="loose",
    )
    assert result.reward == 0.0 and result.details["loose"] is False


def test_unknown_instruction_id_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError,
        match=r"unknown instruction id 'keywords:teleport'.*"
        r"known families: .*change_case.*keywords",
    ):
        score("text", instruction_id_list=["keywords:teleport"], kwargs=[{}])
    [scored] = score_batch(
        "ifeval", [{"response": "text", "instruction_id_list": ["keywords:teleport"], "kwargs": [{}]}]
    )
    assert scored.reward == 0.0 and "keywords:teleport" in scored.details["error"]


def test_none_valued_kwargs_are_ignored_like_ifeval_data() -> None:
    ifeval_row_kwargs = {
        "num_highlights": None,
        "relation": "less than",
        "num_words": 8,
        "keywords": None,
        "prompt_to_repeat": None,
        "end_phrase": None,
        "forbidden_words": [],
        "language": "",
    }
    short = score(
        "Just a few words.", instruction_id_list=["length_constraints:number_words"], kwargs=[ifeval_row_kwargs]
    )
    long = score(
        "This answer has clearly more than eight words in it, sadly.",
        instruction_id_list=["length_constraints:number_words"],
        kwargs=[ifeval_row_kwargs],
    )
    assert (short.reward, long.reward) == (1.0, 0.0)


def test_unexpected_or_missing_kwargs_name_the_key() -> None:
    with pytest.raises(ValueError, match=r"number_words: unexpected kwarg 'num_word'"):
        check("text", "length_constraints:number_words", {"num_word": 3, "relation": "at least"})
    with pytest.raises(ValueError, match=r"missing kwarg 'relation'"):
        check("text", "length_constraints:number_words", {"num_words": 3})
    with pytest.raises(ValueError, match=r"'relation' must be one of"):
        check("text", "length_constraints:number_words", {"num_words": 3, "relation": "about"})
    with pytest.raises(ValueError, match=r"2 entries for 1 instructions"):
        score("text", instruction_id_list=["punctuation:no_comma"], kwargs=[{}, {}])
    with pytest.raises(ValueError, match=r"mode must be one of"):
        score("text", instruction_id_list=["punctuation:no_comma"], kwargs=[{}], mode="lenient")


@pytest.mark.parametrize(
    "prompt",
    [
        f"{REQUEST}. {REPEAT_TEXT}",
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"{REQUEST}. {REPEAT_TEXT}"}],
    ],
)
def test_repeat_prompt_takes_the_request_from_the_prompt(prompt) -> None:
    repeated = f"{REQUEST}.\nThere once was a cat named Lou..."
    kwargs = [{"prompt_to_repeat": None}]
    ok = score(repeated, instruction_id_list=["combination:repeat_prompt"], kwargs=kwargs, prompt=prompt)
    wrong = score(
        "There once was a cat named Lou...",
        instruction_id_list=["combination:repeat_prompt"],
        kwargs=kwargs,
        prompt=prompt,
    )
    assert (ok.reward, wrong.reward) == (1.0, 0.0)
    # the instruction sentence itself is not part of the request to repeat
    assert (
        score(
            f"{REQUEST}. {REPEAT_TEXT}\nThere once...",
            instruction_id_list=["combination:repeat_prompt"],
            kwargs=kwargs,
            prompt=prompt,
        ).reward
        == 1.0
    )


def test_repeat_change_finds_the_request_quoted_in_its_instruction() -> None:
    prompt = build_description("repeat:repeat_change", {"prompt_to_repeat": REQUEST})
    assert prompt.endswith(REQUEST)
    changed = "Compose" + REQUEST.removeprefix("Write")
    assert check(changed, "repeat:repeat_change", {}, prompt=prompt) is True
    assert check(REQUEST, "repeat:repeat_change", {}, prompt=prompt) is False


def test_repeat_prompt_kwarg_wins_over_prompt_and_is_required_without_one() -> None:
    assert (
        check(
            "Say hi. hi", "combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, prompt="Something else entirely"
        )
        is True
    )
    with pytest.raises(ValueError, match=r"missing kwarg 'prompt_to_repeat' \(or pass the prompt\)"):
        check("Say hi. hi", "combination:repeat_prompt", {})


def test_only_the_answer_after_thinking_is_scored() -> None:
    thinking = "<think>Hmm, commas, commas, I must avoid them.</think>\n\nno commas in this answer."
    assert score(thinking, instruction_id_list=LOWER_NO_COMMA, kwargs=[{}, {}]).reward == 1.0
    bad_answer = "<think>plan</think>Oops, A Comma."
    assert score(bad_answer, instruction_id_list=LOWER_NO_COMMA, kwargs=[{}, {}]).reward == 0.0


def test_unfinished_thinking_scores_zero() -> None:
    result = score(
        "<think>still thinking about it without commas",
        instruction_id_list=["punctuation:no_comma"],
        kwargs=[{}],
        mode="loose",
    )
    assert result.reward == 0.0
    assert result.details["unfinished_thinking"] is True
    assert result.details["follow_list"] == [False]


def test_empty_answer_follows_nothing() -> None:
    result = score("<think>x</think>   ", instruction_id_list=["punctuation:no_comma"], kwargs=[{}], mode="loose")
    assert result.reward == 0.0


def test_registry_routes_ifeval_rows_to_this_scorer() -> None:
    requests = [
        {
            "response": "hello world",
            "instruction_id_list": LOWER_NO_COMMA,
            "kwargs": [{}, {}],
            "id": "extra columns are fine",
        },
        {"response": "Hello, World", "instruction_id_list": LOWER_NO_COMMA, "kwargs": [{}, {}]},
    ]
    assert [s.reward for s in score_batch("ifeval", requests)] == [1.0, 0.0]
    [loose] = score_batch(
        "ifeval",
        [{"response": 'Sure:\n{"a": 1}', "instruction_id_list": ["detectable_format:json_format"], "kwargs": [{}]}],
        {"mode": "loose"},
    )
    assert loose.reward == 1.0


def test_score_file_scores_ifeval_lines(tmp_path: Path) -> None:
    rows = [
        {
            "domain": "ifeval",
            "prompt": "Describe rain. Do not use commas.",
            "response": "Rain falls softly on the roof.",
            "instruction_id_list": ["punctuation:no_comma"],
            "kwargs": [{"end_phrase": None}],
        },
        {
            "domain": "ifeval",
            "prompt": "Describe rain in two paragraphs.",
            "response": "Rain falls.\n\nIt stops, then falls again.",
            "instruction_id_list": ["punctuation:no_comma", "paragraphs:paragraphs2"],
            "kwargs": [{}, {}],
        },
        {
            "domain": "ifeval",
            "response": "<think>no commas</think>Rain.\n\nMore rain.",
            "instruction_id_list": ["paragraphs:paragraphs2"],
            "kwargs": [{}],
        },
        {"domain": "ifeval", "response": "x", "instruction_id_list": ["nope:nothing"], "kwargs": [{}]},
    ]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = score_file(source, target, workers=2)
    scored = [json.loads(line) for line in target.read_text().splitlines()]
    assert [row["reward"] for row in scored] == [1.0, 0.0, 1.0, None]
    assert scored[1]["details"]["follow_list"] == [False, True]
    # an instruction with no checker: the scorer raises, so no verdict (not the response's fault)
    assert "nope:nothing" in scored[3]["details"]["error"] and "nope:nothing" in scored[3]["masked"]
    assert report.domains["ifeval"].count == 4 and report.domains["ifeval"].masked == 1


TEA = (
    "The history of tea spans many centuries and cultures. Who DRANK it first? " * 22
    + "\n\nIn short, tea matters. P.S. Enjoy your cup."
)


@pytest.mark.parametrize(
    "row",
    [
        {
            "instruction_id_list": [
                "length_constraints:number_words",
                "detectable_content:postscript",
                "keywords:forbidden_words",
            ],
            "kwargs": [
                {"num_words": 250, "relation": "at least"},
                {"postscript_marker": "P.S."},
                {"forbidden_words": ["coffee", "juice"]},
            ],
        },
        {
            "instruction_id_list": [
                "length_constraints:number_sentences",
                "count:pronouns",
                "change_case:capital_word_frequency",
            ],
            "kwargs": [
                {"num_sentences": 40, "relation": "at least"},
                {"N": 20},
                {"capital_frequency": 20, "capital_relation": "at least"},
            ],
        },
    ],
    ids=["regex-checks", "sentence-and-token-checks"],
)
def test_scoring_a_typical_response_takes_about_a_millisecond(row: dict) -> None:
    response = TEA
    assert 290 <= len(response.split()) <= 320
    assert score(response, **row).reward == 1.0
    variants = [f"{response} {n}" for n in range(200)]  # distinct texts: no cache hits
    start = time.process_time()
    for text in variants:
        score(text, **row)
    per_call = (time.process_time() - start) / len(variants)
    print(f"ifeval score: {per_call * 1e3:.3f} ms CPU per 300-word response, 3 instructions")
    assert per_call < 0.003  # CPU time (robust to machine load); 0.1-0.6 ms measured


def test_registry_dict_is_the_single_source_of_instructions() -> None:
    assert len(INSTRUCTIONS) >= 25 + 20
    assert all(instruction_id == instruction.id for instruction_id, instruction in INSTRUCTIONS.items())


def test_a_failed_instruction_gives_its_reason():
    """An instruction that failed its language check said nothing about why (issue 42): each
    failed instruction now says what its checker saw and what it asked."""
    german = "Das ist ein kurzer deutscher Satz über das Wetter heute und morgen in der Stadt."
    result = score(
        german,
        instruction_id_list=["language:response_language", "length_constraints:number_words", "punctuation:no_comma"],
        kwargs=[{"language": "fr"}, {"num_words": 40, "relation": "at least"}, {}],
    )
    assert result.reward == 0.0 and set(result.details["reasons"]) == {
        "language:response_language",
        "length_constraints:number_words",
    }  # the comma rule holds: no reason
    assert result.details["reasons"]["language:response_language"] == (
        "langdetect reads it as German (de); asked: Your ENTIRE response should be in French language, no other "
        "language is allowed."
    )
    assert result.details["reasons"]["length_constraints:number_words"].startswith("15 words; asked: Answer with at")
    lower = score("hello World", instruction_id_list=["change_case:english_lowercase"], kwargs=[{}])
    assert lower.details["reasons"]["change_case:english_lowercase"].startswith("not all lowercase letters (e.g. 'W')")
    quoted = score("plain", instruction_id_list=["startend:quotation"], kwargs=[{}])
    assert quoted.details["reasons"] == {
        "startend:quotation": "asked: Wrap your entire response with double quotation marks."
    }
    assert "reasons" not in score('"quoted"', instruction_id_list=["startend:quotation"], kwargs=[{}]).details
