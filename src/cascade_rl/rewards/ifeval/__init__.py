"""Rule-based instruction-following verifier: the IF-RL reward (SPEC section 6).

IF-RL trains on verifiable instruction constraints, first of the IFEval taxonomy, then of the
IFBench training taxonomy. The unified model gets a 0/1 reward from this verifier (trained in
non-thinking mode); the thinking model combines it with a reward model (``if_rm`` domain).

Rows use IFEval's data format: ``instruction_id_list: list[str]`` and ``kwargs: list[dict]`` (one
dict per instruction; keys whose value is None are ignored), plus the optional ``prompt`` that
``combination:repeat_prompt`` and the other repeat / copy instructions read when their kwargs lack
``prompt_to_repeat``.

Public API:

* :func:`score` ``(response, *, instruction_id_list, kwargs, prompt=None, mode="strict") -> Score``
  - 1.0 only if the answer follows every instruction; details ``follow_list``,
  ``instruction_id_list``, ``mode``, ``strict`` / ``loose`` verdicts and per-mode lists.
* :func:`check` ``(response, instruction_id, kwargs, prompt=None) -> bool`` - one instruction.
* :data:`INSTRUCTIONS` - id -> :class:`Instruction` (explicit dict, duplicates rejected).
* :func:`build_description` ``(instruction_id, kwargs) -> str`` - the instruction's prompt text.

Every id and its kwargs are listed in the tables of :mod:`.ifeval_checks` (IFEval, 25 ids),
:mod:`.ifbench_checks` (IFBench) and :mod:`.iftrain_checks` (IFBench training constraints).
Text is measured without NLTK data; :mod:`.text` documents how its tokenizers differ.
"""

from cascade_rl.rewards.ifeval.instructions import (
    IFBENCH_IDS,
    IFEVAL_IDS,
    IFTRAIN_IDS,
    INSTRUCTIONS,
    build_description,
    check,
    get_instruction,
)
from cascade_rl.rewards.ifeval.scorer import MODES, loose_variants, score
from cascade_rl.rewards.ifeval.spec import Instruction

__all__ = [
    "IFBENCH_IDS",
    "IFEVAL_IDS",
    "IFTRAIN_IDS",
    "INSTRUCTIONS",
    "Instruction",
    "MODES",
    "build_description",
    "check",
    "get_instruction",
    "loose_variants",
    "score",
]
