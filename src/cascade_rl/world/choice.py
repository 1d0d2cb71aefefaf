"""Toy multiple-choice questions (issue 44; SPEC section 11, Nemotron-Cascade 2's STEM MCQA at toy
scale): two or three short facts about where people live, a question about one of them, four
lettered options, and the answer as NVIDIA's strict MCQA verifier reads it -- the single letter
in the last ``\\boxed{}``.

Rows keep NeMo Gym's MCQA fields (``options`` as a list of ``{letter: text}``,
``expected_answer``), so :mod:`cascade_rl.rewards.mcqa` scores them as it scores NVIDIA's rows.
The distractors are the other people's cities first, so the question is answered by reading the
right fact, not by spotting the one city named in the prompt.

The non-thinking SFT answer is the boxed letter alone (``letter``, the default) or, with the
world option ``mcqa_answer: check``, the fact restated and the options checked in order up to the
right one before the box: a small model that names the right city can still not find its letter
(SmolLM2-135M named it in 185 of 200 held-out questions and boxed its letter in 52;
docs/real-model.md).
"""

from __future__ import annotations

import random
from typing import Literal

from cascade_rl.world.tasks import Task, pick, user
from cascade_rl.world.vocab import CITIES, NAMES

LETTERS = ("A", "B", "C", "D")
INSTRUCTION = "Answer with the letter of the right option in \\boxed{}."
AnswerStyle = Literal["letter", "check"]
ANSWER_STYLES = ("letter", "check")
#: the fixed text of every request (left out when the world decontaminates: :func:`.build.scaffolding`)
SCAFFOLDING = ("\nWhere does ", INSTRUCTION)


def choice_task(rng: random.Random, answer_style: AnswerStyle = "letter") -> Task:
    """A multiple-choice task (domain ``mcqa``) with its gold reasoning and boxed letter;
    ``answer_style``: the non-thinking answer (module docstring)."""
    people = rng.sample(NAMES, rng.randint(2, 3))
    homes = rng.sample(CITIES, len(people) + 4)
    facts = [f"{person} lives in {city}." for person, city in zip(people, homes)]
    asked = pick(rng, range(len(people)))
    options = homes[: len(people)] + homes[len(people) :][: len(LETTERS) - len(people)]
    rng.shuffle(options)
    letter = LETTERS[options.index(homes[asked])]
    listed = "\n".join(f"{key}) {text}" for key, text in zip(LETTERS, options))
    request = f"{' '.join(facts)}\nWhere does {people[asked]} live?\n{listed}\n{INSTRUCTION}"
    return Task(
        domain="mcqa",
        kind=f"facts{len(people)}",
        prompt=user(request),
        answer=f"\\boxed{{{letter}}}",
        reasoning=f"{people[asked]} lives in {homes[asked]}, option {letter}.",
        no_think_answer=_checked_answer(people[asked], homes[asked], options) if answer_style == "check" else None,
        source="science",
        reference={"options": [{key: text} for key, text in zip(LETTERS, options)], "expected_answer": letter},
    )


def _checked_answer(person: str, home: str, options: list[str]) -> str:
    """The fact restated, each option up to the right one marked no / yes, then the boxed letter."""
    right = options.index(home)
    checks = [f"{key}) {text}: {'yes' if text == home else 'no'}" for key, text in zip(LETTERS, options[: right + 1])]
    return "\n".join([f"{person} lives in {home}.", *checks, f"\\boxed{{{LETTERS[right]}}}"])
