"""Near-miss SFT answers: what the toy world's SFT data teaches besides the gold form (issue 4).

A real SFT model comes out of supervised training with habits a verifier does not reward:
an unboxed final answer, a label printed before the result, one instruction forgotten, padding
around a good answer. RL is what removes them (SPEC section 6: each stage raises the reward of
its own verifier). A few-million-parameter model trained on perfectly clean toy data has no
such habits, only errors of capacity (it cannot count further or copy a long name), which a
few dozen GRPO steps barely move (docs/toy-world.md, "What was measured").

``WorldOptions(sft_near_miss=p)`` therefore writes a share ``p`` of the SFT answers of the
verifiable domains in a plausible form that loses the reward, one rule per domain:

=================  ==========================================================================
math               ``The answer is 87.``: the right value, not in ``\\boxed{}`` (scores 0)
code               the gold program prints ``Answer:`` before its result (every test fails)
instruction        one constraint of the prompt broken in the answer (capital letter, a comma,
following          the quotes or title or postscript dropped, text after the end phrase);
                   kept gold when the real verifier still passes it
general chat       the gold answer padded with filler sentences (the reward model's *verbose*
                   rejected kind)
SWE repair         the edit names its file without the package directory (``### utils.py``
                   for ``### farm/utils.py``): the edit does not apply (scores -1); only when
                   ``swe`` is among the near-miss domains (``WorldOptions.near_miss_domains``)
multiple choice    ``Answer: B``: the right letter, not in ``\boxed{}`` (the strict grading
                   mode reads the box only); only when ``mcqa`` is named
structured output  the document with one field the schema does not have (the strict schema
                   allows no other property); only when ``structured_output`` is named
workplace          the toy office's episode stops after its look-up and answers without the
                   write (the databases end unchanged; :func:`cascade_rl.world.office.sft_row`);
                   only when ``workplace`` is named
=================  ==========================================================================

Tool calls stay gold. The RL prompts and the benchmarks are never touched: only the habits the
SFT model starts RL with change, not what is measured. The default share is 0 (clean data);
``recipes/tiny.yaml`` sets it and says so.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace

from cascade_rl.chat import THINK_CLOSE, THINK_OPEN
from cascade_rl.rewards import ifeval
from cascade_rl.world import instructions
from cascade_rl.world.general import FILLERS
from cascade_rl.world.tasks import Task

#: Domains whose SFT answers may be written as near misses.
DOMAINS = ("math", "code", "ifeval", "preference", "swe", "mcqa", "structured_output", "workplace")
#: The near-miss domains of a world that does not name them.
DEFAULT_DOMAINS = ("math", "code", "ifeval", "preference")


def near_miss(task: Task, rng: random.Random, domains: tuple[str, ...] = DEFAULT_DOMAINS) -> Task:
    """``task`` with its answer in a near-miss form of its domain (unchanged when it has none
    or its domain is not among ``domains``)."""
    rewrite = _REWRITES.get(task.domain) if task.domain in domains else None
    return rewrite(task, rng) if rewrite else task


def _math(task: Task, rng: random.Random) -> Task:
    return replace(task, answer=f"The answer is {task.reference['answer']}.")


def _code(task: Task, rng: random.Random) -> Task:
    labelled = task.answer.replace("print(", 'print("Answer:", ', 1)
    return replace(task, answer=labelled)


def _bare_file_name(task: Task, rng: random.Random) -> Task:
    path = task.reference["golden_patch"].split("\n", 1)[0].split(" b/", 1)[1]
    return replace(task, answer=task.answer.replace(f"### {path}\n", f"### {path.rsplit('/', 1)[-1]}\n"))


def _verbose(task: Task, rng: random.Random) -> Task:
    before, after = rng.sample(FILLERS, 2)
    return replace(task, answer=f"{before} {task.answer} {after}")


def _break_instruction(task: Task, rng: random.Random) -> Task:
    ids, kwargs = task.reference["instruction_id_list"], task.reference["kwargs"]
    breakable = [(i, k) for i, k in zip(ids, kwargs) if i in _BREAKERS]
    if not breakable:
        return task
    instruction, arguments = breakable[rng.randrange(len(breakable))]
    answer = _BREAKERS[instruction](task.answer, arguments)
    response = f"{THINK_OPEN}{task.reasoning}{THINK_CLOSE}{answer}"
    if ifeval.score(response, instruction_id_list=ids, kwargs=kwargs).reward >= 1:
        return task
    return replace(task, answer=answer)


def _capitalise(text: str, _: dict) -> str:
    return text[:1].upper() + text[1:]


def _add_comma(text: str, _: dict) -> str:
    return re.sub(r"^(\S+) ", r"\1, ", text, count=1)


def _unquote(text: str, _: dict) -> str:
    return text.strip('"')


def _drop_title(text: str, _: dict) -> str:
    return re.sub(r"<<[^>]*>>\s*", "", text, count=1)


def _drop_postscript(text: str, arguments: dict) -> str:
    marker = arguments["postscript_marker"]
    return text.split(marker)[0].rstrip() if marker in text else text


def _say_more(text: str, _: dict) -> str:
    return f"{text} Thanks."


_BREAKERS = {
    instructions.LOWERCASE: _capitalise,
    instructions.NO_COMMA: _add_comma,
    instructions.QUOTATION: _unquote,
    instructions.TITLE: _drop_title,
    instructions.POSTSCRIPT: _drop_postscript,
    instructions.END_PHRASE: _say_more,
}


def _unboxed_letter(task: Task, rng: random.Random) -> Task:
    return replace(task, answer=f"Answer: {task.reference['expected_answer']}")


def _extra_field(task: Task, rng: random.Random) -> Task:
    if task.reference.get("schema_type") == "yaml":
        return replace(task, answer=f"{task.answer}\nnote: none")
    document = json.loads(task.answer)
    return replace(task, answer=json.dumps({**document, "note": "none"}))


_REWRITES = {
    "math": _math,
    "code": _code,
    "ifeval": _break_instruction,
    "preference": _verbose,
    "swe": _bare_file_name,
    "mcqa": _unboxed_letter,
    "structured_output": _extra_field,
}
