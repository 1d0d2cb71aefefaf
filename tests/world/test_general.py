"""Toy general chat: parallel thinking / non-thinking answers and the paper's kinds of
rejected answers for reward-model pairs."""

import random

import pytest

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.language import is_mixed
from cascade_rl.world import general
from cascade_rl.world.tasks import sft_row
from tests.world.conftest import draw


def test_same_seed_same_tasks():
    assert draw(general.chat_task, 40) == draw(general.chat_task, 40)
    assert [general.preference_pair(random.Random(3)) for _ in range(3)] == [
        general.preference_pair(random.Random(3)) for _ in range(3)
    ]


def test_parallel_rows_share_the_prompt_and_the_answer():
    task = draw(general.chat_task, 1)[0]
    think, plain = sft_row(task, "think", "a"), sft_row(task, "no_think", "b")
    assert think["messages"][0]["content"] == plain["messages"][0]["content"]
    assert [think["messages"][0]["mode"], plain["messages"][0]["mode"]] == ["think", "no_think"]
    split = split_thinking(think["messages"][-1]["content"])
    assert split.finished and split.reasoning and split.answer == plain["messages"][-1]["content"]


def test_off_topic_answers_answer_a_related_but_different_request():
    rng = random.Random(0)
    for _ in range(100):
        request = general.random_request(rng)
        rejected = general.off_topic_answer(rng, request)
        assert rejected != request.answer
        answers_of_siblings = {
            general.Request(request.intent, t, t).answer for t in general.TOPICS_BY_CATEGORY[request.topic.category]
        }
        answers_of_other_intents = {general.Request(i, request.topic, request.other).answer for i in general.INTENTS}
        assert rejected in answers_of_siblings | answers_of_other_intents or request.intent.name == "compare"


@pytest.mark.parametrize("kind", general.REJECTED_KINDS)
def test_each_rejected_kind_is_worse_in_its_own_way(kind):
    rng = random.Random(1)
    request = general.random_request(rng)
    rejected = general.rejected_answer(rng, request, kind)
    assert rejected != request.answer
    if kind == "verbose":
        assert request.answer in rejected and len(rejected) > len(request.answer)
    if kind == "repetitive":
        first = rejected.split(".")[0]
        assert rejected.count(first) >= 3
    if kind == "wrong_language":
        assert any(foreign in rejected for foreign in general.FOREIGN)


def test_some_wrong_language_answers_trip_the_language_mixing_check():
    rng = random.Random(2)
    flagged = [
        is_mixed(general.rejected_answer(rng, general.random_request(rng), "wrong_language"), "Tell me about cats.")
        for _ in range(40)
    ]
    assert any(flagged) and not all(flagged)


def test_unknown_rejected_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown rejected kind"):
        general.rejected_answer(random.Random(0), general.random_request(random.Random(0)), "rude")
