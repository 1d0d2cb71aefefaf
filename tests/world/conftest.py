"""Helpers shared by the toy-world tests: score gold answers with the real scorers."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from cascade_rl.rewards.registry import REGISTRY, score_batch
from cascade_rl.world.tasks import Task

#: the tool-call scorer through the registry once it is registered there, by path until then
TOOL_CALL_DOMAIN = "tool_call" if "tool_call" in REGISTRY else "cascade_rl.rewards.tool_call:score"


def draw(generator: Callable[[random.Random], Task], count: int, seed: int = 0) -> list[Task]:
    rng = random.Random(seed)
    return [generator(rng) for _ in range(count)]


def gold_rewards(domain: str, tasks: list[Task], mode: str) -> list[float]:
    """Rewards of the tasks' gold responses in ``mode`` from the real scorer."""
    requests = [{"response": t.response(mode), "prompt": list(t.prompt), **t.reference} for t in tasks]
    return [s.reward for s in score_batch(domain, requests, workers=2)]


@pytest.fixture
def score_gold():
    return gold_rewards
