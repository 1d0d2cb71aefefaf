"""Answers known in advance for the evaluation tests (imported by name): the chain of a tiny model
that answers every prompt ``<think>x</think>Answer: C`` and a judge's verdict for position A.
conftest.py puts tests/llm (llm_helpers) on the path first and builds the models from them."""

from __future__ import annotations

from llm_helpers import SURE

from cascade_rl.chat import IM_END

ANSWER_C = "<think>x</think>Answer: C"
ANSWER_C_CHAIN = {
    "\n": {"<think>": SURE},
    "<think>": {"x": SURE},
    "x": {"</think>": SURE},
    "</think>": {"A": SURE},
    **{a: {b: SURE} for a, b in zip("Answer", "nswer:")},
    ":": {" ": SURE},
    " ": {"C": SURE},
    "C": {IM_END: SURE},
}
FIRST_IS_BETTER = "[[A>>B]]"
