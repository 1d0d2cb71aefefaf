"""The IF-RL reward: all instructions of a row must hold (SPEC section 6, IF-RL).

The unified model's IF-RL reward is rule-based and binary: 1.0 only if the *answer* (text after
``</think>``, stripped; an unfinished thinking response has no answer and scores 0; a response
without thinking tags is read as it is, unstripped, as IFEval's and IFBench's evaluators read it)
follows every instruction of the row, else 0.0. Modes follow IFEval's evaluation:

* ``strict`` (default, IFEval's "strict" accuracy): the answer itself must follow.
* ``loose``: an instruction also counts as followed when any of these variants follows it: the
  answer without its first line, without its last line, without both, and each of the four
  texts with every ``*`` removed.

Details carry the verdicts of both modes, so logs show how far strict and loose diverge, and
``reasons``: for each failed instruction, what its checker saw (the language langdetect read, the
words counted, ...) and what it asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cascade_rl.chat import THINK_CLOSE, THINK_OPEN, split_thinking
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.ifeval.instructions import get_instruction
from cascade_rl.rewards.ifeval.spec import Instruction

MODES = ("strict", "loose")
Bound = tuple[Instruction, dict[str, Any]]


def loose_variants(response: str) -> list[str]:
    """IFEval's eight loose-mode readings of a response (the response itself first)."""
    lines = response.split("\n")
    cut = [response, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return cut + [text.replace("*", "") for text in cut]


def bind_instructions(
    instruction_id_list: Sequence[str], kwargs: Sequence[Mapping[str, Any] | None] | None, prompt: Any = None
) -> list[Bound]:
    """Each instruction with its validated arguments; ValueError for a malformed row."""
    if isinstance(instruction_id_list, str) or instruction_id_list is None:
        raise ValueError(f"instruction_id_list must be a list of instruction ids, got {instruction_id_list!r}")
    ids = list(instruction_id_list)
    if not ids:
        raise ValueError("instruction_id_list is empty")
    kwargs_list = [{}] * len(ids) if kwargs is None else list(kwargs)
    if len(kwargs_list) != len(ids):
        raise ValueError(f"kwargs has {len(kwargs_list)} entries for {len(ids)} instructions")
    bound = []
    for instruction_id, raw in zip(ids, kwargs_list):
        instruction = get_instruction(instruction_id)
        bound.append((instruction, instruction.arguments(raw, prompt)))
    return bound


def _follows_loosely(instruction: Instruction, arguments: Mapping[str, Any], variants: Sequence[str]) -> bool:
    return any(instruction.follows(text, arguments) for text in variants)


def score(
    response: str,
    *,
    instruction_id_list: Sequence[str],
    kwargs: Sequence[Mapping[str, Any] | None] | None,
    prompt: Any = None,
    mode: str = "strict",
) -> Score:
    """1.0 if the answer of ``response`` follows every instruction (in ``mode``), else 0.0."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    bound = bind_instructions(instruction_id_list, kwargs, prompt)
    ids = [instruction.id for instruction, _ in bound]
    split = split_thinking(response or "")
    if not split.finished:
        unfollowed = [False] * len(bound)
        return Score(0.0, _details(ids, mode, unfollowed, unfollowed, unfinished_thinking=True))
    answer = _answer(response or "", split.answer)
    strict = [instruction.follows(answer, arguments) for instruction, arguments in bound]
    variants = loose_variants(answer) if not all(strict) else []
    loose = [
        followed or _follows_loosely(instruction, arguments, variants)
        for followed, (instruction, arguments) in zip(strict, bound)
    ]
    details = _details(ids, mode, strict, loose)
    failed = [bound[i] for i, followed in enumerate(details["follow_list"]) if not followed]
    if failed:  # why each failed instruction failed, on the answer itself
        details["reasons"] = {instruction.id: instruction.why_not(answer, args) for instruction, args in failed}
    return Score(1.0 if all(details["follow_list"]) else 0.0, details)


def _answer(response: str, stripped_answer: str) -> str:
    """The text the instructions are checked on: a response without thinking tags as it is (the
    official evaluators read it unstripped: a trailing blank line is a CSV row, a first line's
    indent counts), else the answer after ``</think>``, stripped."""
    if THINK_OPEN in response or THINK_CLOSE in response:
        return stripped_answer
    return response


def _details(ids: list[str], mode: str, strict: list[bool], loose: list[bool], **extra: Any) -> dict[str, Any]:
    follow = strict if mode == "strict" else loose
    return {
        "follow_list": follow,
        "instruction_id_list": ids,
        "mode": mode,
        "strict": all(strict),
        "loose": all(loose),
        "strict_follow_list": strict,
        "loose_follow_list": loose,
        "failed": [i for i, followed in zip(ids, follow) if not followed],
        **extra,
    }
