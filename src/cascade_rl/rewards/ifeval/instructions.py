"""The registry of verifiable instructions and the one-instruction API (SPEC section 6, IF-RL).

``INSTRUCTIONS`` is one explicit dict (DESIGN convention 4) built from the three families'
declarations: the 25 IFEval instructions (:mod:`.ifeval_checks`), the IFBench constraints
(:mod:`.ifbench_checks`) and the IFBench training constraints (:mod:`.iftrain_checks`). Each
module's docstring holds the table of its ids, kwargs and rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cascade_rl.rewards.ifeval.ifbench_checks import IFBENCH
from cascade_rl.rewards.ifeval.ifeval_checks import IFEVAL
from cascade_rl.rewards.ifeval.iftrain_checks import IFTRAIN
from cascade_rl.rewards.ifeval.spec import Instruction, build_registry

INSTRUCTIONS: dict[str, Instruction] = build_registry([IFEVAL, IFBENCH, IFTRAIN])
#: the ids of each taxonomy, for stage 1 (IFEval) and stage 2 (IFBench) data generation
IFEVAL_IDS: tuple[str, ...] = tuple(i.id for i in IFEVAL)
IFBENCH_IDS: tuple[str, ...] = tuple(i.id for i in IFBENCH)
IFTRAIN_IDS: tuple[str, ...] = tuple(i.id for i in IFTRAIN)


def get_instruction(instruction_id: str) -> Instruction:
    """The registered instruction, or ValueError naming the id and the known families."""
    try:
        return INSTRUCTIONS[instruction_id]
    except (KeyError, TypeError):
        families = sorted({instruction.family for instruction in INSTRUCTIONS.values()})
        raise ValueError(
            f"unknown instruction id {instruction_id!r}; known families: "
            f"{', '.join(families)} (see cascade_rl.rewards.ifeval.INSTRUCTIONS)"
        ) from None


def check(response: str, instruction_id: str, kwargs: Mapping[str, Any] | None = None, prompt: Any = None) -> bool:
    """Whether ``response`` (taken as is, no thinking split) follows one instruction, strictly.
    ``prompt`` (text or chat messages) supplies ``prompt_to_repeat`` when kwargs lack it."""
    instruction = get_instruction(instruction_id)
    return instruction.follows(response, instruction.arguments(kwargs, prompt))


def build_description(instruction_id: str, kwargs: Mapping[str, Any] | None = None) -> str:
    """The instruction's text for ``kwargs`` (IFEval's ``build_description``), for prompts."""
    return get_instruction(instruction_id).describe(kwargs)
