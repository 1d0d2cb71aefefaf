"""Off-topic preference pairs for the reward model (SPEC section 4, appendix C.1):
``cascade data offtopic``.

For each prompt:

1. **Rewrite** it into a related but different prompt with the appendix C.1 step 1 template
   (``rewriter``, by default the strong model).
2. **Judge** with the appendix C.1 step 2 YES/NO question "Are the two instructions asking the
   same thing?" (:class:`cascade_rl.llm.YesNoJudge`, P(YES)); a rewrite the judge finds to ask
   the same thing (P(YES) >= ``same_threshold``, 0.5) is dropped.
3. **Answer** the rewritten prompt with the ``strong`` model: the *rejected* response -- it
   looks good but answers another question.
4. **Answer** the original prompt with the ``weak`` model: the *chosen* response.

Output rows are TRL preference pairs (``prompt``, ``chosen``, ``rejected``, as
docs/data-formats.md) with ``rewritten_prompt`` and ``judge_p_same``. Answers are the final
answers (a thinking response's text after ``</think>``); a response with unfinished thinking or
no text drops the pair. Generators and the judge are local checkpoints or OpenAI-compatible
servers; all requests of a batch are issued together, each server bounding its own concurrency.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_rl.chat import split_thinking
from cascade_rl.data.job import Drop, Keep, Summary, prevalidate, run_job
from cascade_rl.data.rows import Row, RowError, prompt_messages
from cascade_rl.llm.base import Sampling

REWRITE_TEMPLATE = (
    'Given an user input (called "given input"), please generate a new user input (called "generated input") '
    "such that: (1) The generated input is highly relevant to but different from the given input. (2) The "
    "correct response to the generated input superficially resembles the correct response to the given input as "
    "much as possible. (3) But actually, the correct response to the generated input should not be a correct "
    "response to the given input.\n\nGiven input: {instruction}\n\nGenerated input:"
)
JUDGE_TEMPLATE = (
    "There are two instructions, Instruction A and Instruction B. Are the two instructions asking the same thing? "
    "Please answer with 'YES' or 'NO'.\n\nInstruction A: {a}\n\nInstruction B: {b}"
)
_LABEL = re.compile(r"^\s*(?:\*\*)?generated input(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*", re.I)


@dataclass
class OfftopicModels:
    """The generators (``cascade_rl.llm`` backends) and judge of the pipeline."""

    strong: Any
    weak: Any
    judge: Any
    rewriter: Any = None
    specs: dict[str, str] | None = None  # how each was named (identifies the job for resuming)


def instruction_of(data: dict) -> str:
    """The single-turn user instruction of a row (RowError when there is none)."""
    turns = [m for m in prompt_messages(data) if m["role"] == "user"]
    if not turns or not turns[-1]["content"].strip():
        raise RowError("no user prompt (prompt, messages, context, question, ...)")
    return turns[-1]["content"].strip()


def clean_rewrite(response: str) -> str:
    """The rewritten prompt of a rewriter's response: its answer, without a "Generated input:"
    label or surrounding quotes."""
    split = split_thinking(response)
    if not split.finished:
        return ""
    text = _LABEL.sub("", split.answer.strip())
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return text.strip()


def judge_all(judge: Any, conversations: Sequence[list[dict]]) -> list[float]:
    """P(YES) for each conversation: concurrently against a server (its own concurrency limit
    applies), one after the other on a local judge."""
    import asyncio

    from cascade_rl.llm import OpenAICompatGenerator

    if isinstance(judge.backend, OpenAICompatGenerator):

        async def ask() -> list[float]:
            return list(await asyncio.gather(*(judge.aprobability_yes(c) for c in conversations)))

        return judge.backend.run_sync(ask())
    return [judge.probability_yes(c) for c in conversations]


def _answer(response: str) -> str:
    split = split_thinking(response)
    return split.answer if split.finished else ""


def offtopic_pairs(
    inputs: Sequence[Path],
    output: Path,
    models: OfftopicModels,
    *,
    same_threshold: float = 0.5,
    sampling: Sampling = Sampling(),
    mode: str = "no_think",
    batch_size: int = 16,
    skip_malformed: bool = False,
    **job: Any,
) -> Summary:
    """Run the appendix C.1 pipeline (module docstring) over the prompts of ``inputs``."""
    total = prevalidate(inputs, instruction_of, skip_malformed=skip_malformed)
    steps = OfftopicSteps(models, same_threshold=same_threshold, sampling=sampling.times(1), mode=mode)
    options = {
        "models": models.specs,
        "same_threshold": same_threshold,
        "sampling": steps.sampling.settings(),
        "mode": mode,
    }
    return run_job(
        "offtopic",
        inputs,
        output,
        steps.process,
        options=options,
        batch_size=batch_size,
        skip_malformed=skip_malformed,
        total=total,
        **job,
    )


class OfftopicSteps:
    """The steps of appendix C.1 over a batch of rows, each on the rows still standing: read
    the instruction, rewrite it, ask the judge whether the rewrite asks the same thing, answer
    both (a row a step rules out is dropped with the reason)."""

    def __init__(self, models: OfftopicModels, *, same_threshold: float, sampling: Sampling, mode: str):
        self.models, self.same_threshold, self.sampling, self.mode = models, same_threshold, sampling, mode

    def process(self, rows: Sequence[Row]) -> list:
        outcomes: list = [None] * len(rows)
        instructions = self.instructions(rows, outcomes)
        rewritten = self.rewrite(instructions, outcomes)
        same = self.judge(instructions, rewritten, outcomes)
        self.answer(instructions, rewritten, same, outcomes)
        return outcomes

    def instructions(self, rows: Sequence[Row], outcomes: list) -> dict[int, str]:
        work: dict[int, str] = {}
        for i, row in enumerate(rows):
            try:
                work[i] = instruction_of(row.data)
            except RowError as error:
                outcomes[i] = error
        return work

    def rewrite(self, work: dict[int, str], outcomes: list) -> dict[int, str]:
        order = standing(work, outcomes)
        prompts = [self.user(REWRITE_TEMPLATE.format(instruction=work[i])) for i in order]
        rewrites = self.generate(self.models.rewriter or self.models.strong, prompts)
        rewritten = {i: clean_rewrite(texts[0]) for i, texts in zip(order, rewrites)}
        for i in order:
            if not rewritten[i] or rewritten[i] == work[i]:
                outcomes[i] = Drop("no usable rewrite")
        return rewritten

    def judge(self, work: dict[int, str], rewritten: dict[int, str], outcomes: list) -> dict[int, float]:
        order = standing(work, outcomes)
        questions = [self.user(JUDGE_TEMPLATE.format(a=work[i], b=rewritten[i])) for i in order]
        same = dict(zip(order, judge_all(self.models.judge, questions)))
        for i in order:
            if same[i] >= self.same_threshold:
                outcomes[i] = Drop("judge: the rewrite asks the same thing")
        return same

    def answer(self, work: dict[int, str], rewritten: dict[int, str], same: dict[int, float], outcomes: list) -> None:
        order = standing(work, outcomes)
        rejected = self.generate(self.models.strong, [self.user(rewritten[i]) for i in order])
        chosen = self.generate(self.models.weak, [self.user(work[i]) for i in order])
        for i, bad, good in zip(order, rejected, chosen):
            bad_answer, good_answer = _answer(bad[0]), _answer(good[0])
            if not bad_answer.strip() or not good_answer.strip():
                outcomes[i] = Drop("empty or unfinished answer")
                continue
            pair = {
                "prompt": [{"role": "user", "content": work[i]}],
                "chosen": [{"role": "assistant", "content": good_answer}],
                "rejected": [{"role": "assistant", "content": bad_answer}],
                "rewritten_prompt": rewritten[i],
                "judge_p_same": round(same[i], 4),
                "source": "offtopic",
            }
            outcomes[i] = Keep([pair])

    def user(self, text: str) -> list[dict]:
        return [{"role": "user", "content": text, "mode": self.mode}]

    def generate(self, model: Any, prompts: list[list[dict]]) -> list[list[str]]:
        from cascade_rl.llm import generate_many

        return generate_many(model, prompts, self.sampling)


def standing(work: dict[int, str], outcomes: list) -> list[int]:
    """The rows of ``work`` that no step has ruled out yet, in order."""
    return [i for i in work if outcomes[i] is None]
