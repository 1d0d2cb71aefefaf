"""Fixtures of the evaluation tests: the real ``transformers serve`` of the generation-backend
tests (tests/llm), and tiny chain models whose answers are known in advance (llm_helpers.py):
a model that answers every prompt ``<think>x</think>Answer: C``, and a judge that always
prefers the answer shown first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

LLM_TESTS = Path(__file__).resolve().parents[1] / "llm"
sys.path.insert(0, str(LLM_TESTS))

from eval_assets import ANSWER_C_CHAIN, FIRST_IS_BETTER  # noqa: E402
from llm_helpers import SURE, build_chain_model  # noqa: E402

from cascade_rl.chat import IM_END  # noqa: E402

_spec = importlib.util.spec_from_file_location("llm_test_fixtures", LLM_TESTS / "conftest.py")
_llm_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_llm_fixtures)
transformers_server = _llm_fixtures.transformers_server


@pytest.fixture(scope="session")
def answer_c_model(tmp_path_factory) -> Path:
    return build_chain_model(tmp_path_factory.mktemp("answer-c"), ANSWER_C_CHAIN)


@pytest.fixture(scope="session")
def first_position_judge(tmp_path_factory) -> Path:
    """A judge biased to position A: every judgement is ``[[A>>B]]`` (one added token)."""
    chain = {"\n": {FIRST_IS_BETTER: SURE}, FIRST_IS_BETTER: {IM_END: SURE}}
    return build_chain_model(tmp_path_factory.mktemp("judge-a"), chain, (FIRST_IS_BETTER,))
