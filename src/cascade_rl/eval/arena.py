"""Win rate against baseline answers, ArenaHard-style (SPEC section 9: ArenaHard in the paper's
main table; the toy world's arena benchmark).

Each sampled answer is compared with the baseline answer to the same prompt, in one of two ways:

**An LLM judge** (``judge`` set), as ArenaHard v0.1 judges (arena-hard-auto):

* the judge reads ArenaHard's system prompt and the user prompt with two answers, "Assistant
  A" and "Assistant B", and ends with a verdict label ``[[A>>B]]``, ``[[A>B]]``, ``[[A=B]]``,
  ``[[B>A]]`` or ``[[B>>A]]``; it is sampled at temperature 0 with up to 4,096 tokens;
* **position swap**: every answer is judged twice, once as B (the baseline as A) and once as A
  (the baseline as B), and each judgement is one game;
* the verdict is the label the judgement gives (after ``</think>`` for a thinking judge); a
  judgement with no label, or with two different labels, is no game (ArenaHard drops it);
  such games are counted in ``unparsed_games``;
* a game scores 1 for a win of the evaluated answer, 0.5 for a tie and 0 for a loss; a
  *strong* verdict (``>>``) counts ``strong_weight`` times (ArenaHard's WEIGHT = 3);
* **inconsistent verdicts** (the two games of one answer disagree on which answer is better:
  the judge preferred a position, not an answer) are kept as two games that cancel out, as
  ArenaHard does: a judge that always prefers position A scores every answer 50%. Their share
  of the pairs is reported as ``inconsistent_pairs`` (percent);
* the raw win rate is the weighted mean game score. With one model against one baseline this
  is exactly what ArenaHard's Bradley-Terry fit gives (ties count half a win for each side),
  so no fit is needed; the standard error is taken over prompts;
* **style control** (on by default, as the paper reports ArenaHard; option ``style_control``):
  the games are fitted again by a Bradley-Terry (logistic) model whose covariates are the
  style differences of the two answers, as in ArenaHard's style control: for answer length,
  markdown headers, list items and bold spans (code blocks removed), ``(A - B) / (A + B)``,
  standardised over the games; the fit (L2 0.5 on the summed loss, Newton's method) gives the
  answer's strength with style held out, and the headline is its win probability against the
  baseline, ``sigmoid(theta)``. Length is counted in words and punctuation marks, not in a
  tokenizer's tokens (the ratios are close). The raw win rate is kept as ``raw_win_rate``, and
  ``length_ratio`` (mean answer length over mean baseline length, characters) flags
  length-driven wins.

**The reward model** (no judge; the toy world): each answer wins when the reward model scores it
above the baseline answer (ties count half).

Baseline answers come from the benchmark's ``baseline`` file (ArenaHard's ``model_answer``
layout or ``{"id", "response"}`` rows), else from each row's ``baseline`` field, else they are
sampled once from the first policy evaluated and cached (the SFT model in a full cascade), so
every later stage is compared with the same answers. Thinking is stripped from every answer
before it is judged (an unfinished thinking response has an empty answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from cascade_rl.chat import last_user_text, split_thinking

STRONG_WEIGHT = 3
JUDGE_MAX_TOKENS = 4096
JUDGE_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants "
    "to the user prompt displayed below. You will be given assistant A's answer and assistant B's answer. Your "
    "job is to evaluate which assistant's answer is better.\n\n"
    "Begin your evaluation by generating your own answer to the prompt. You must provide your answers before "
    "judging any answers.\n\n"
    "When evaluating the assistants' answers, compare both assistants' answers with your answer. You must "
    "identify and correct any mistakes or inaccurate information.\n\n"
    "Then consider if the assistant's answers are helpful, relevant, and concise. Helpful means the answer "
    "correctly responds to the prompt or follows the instructions. Note when user prompt has any ambiguity or "
    "more than one interpretation, it is more helpful and appropriate to ask for clarifications or more "
    "information from the user than providing an answer based on assumptions. Relevant means all parts of the "
    "response closely connect or are appropriate to what is being asked. Concise means the response is clear "
    "and not verbose or excessive.\n\n"
    "Then consider the creativity and novelty of the assistant's answers when needed. Finally, identify any "
    "missing important information in the assistants' answers that would be beneficial to include when "
    "responding to the user prompt.\n\n"
    "After providing your explanation, you must output only one of the following choices as your final verdict "
    "with a label:\n\n"
    "1. Assistant A is significantly better: [[A>>B]]\n"
    "2. Assistant A is slightly better: [[A>B]]\n"
    "3. Tie, relatively the same: [[A=B]]\n"
    "4. Assistant B is slightly better: [[B>A]]\n"
    "5. Assistant B is significantly better: [[B>>A]]\n\n"
    'Example output: "My final verdict is tie: [[A=B]]".'
)
JUDGE_TEMPLATE = (
    "<|User Prompt|>\n{question}\n\n"
    "<|The Start of Assistant A's Answer|>\n{answer_a}\n<|The End of Assistant A's Answer|>\n\n"
    "<|The Start of Assistant B's Answer|>\n{answer_b}\n<|The End of Assistant B's Answer|>"
)
_LABEL = re.compile(r"\[\[([AB<>=]+)\]\]")
#: verdict -> (score of assistant A, strong?)
_VERDICTS = {"A>>B": (1.0, True), "A>B": (1.0, False), "A=B": (0.5, False), "B>A": (0.0, False), "B>>A": (0.0, True)}


def answer_text(response: str) -> str:
    """What is judged: the answer after ``</think>`` (empty when the thinking never ended)."""
    return split_thinking(response or "").answer


def parse_verdict(judgement: str) -> str | None:
    """The judgement's verdict label, or None when it has none, several different ones, or an
    unknown one (ArenaHard's ``get_score``)."""
    labels = set(_LABEL.findall(answer_text(judgement)))
    if len(labels) != 1:
        return None
    (label,) = labels
    return label if label in _VERDICTS else None


def game(verdict: str | None, answer_is_a: bool, strong_weight: int = STRONG_WEIGHT) -> tuple[float, int] | None:
    """(score of the evaluated answer, weight) of one judged game, None for no verdict."""
    if verdict is None:
        return None
    score_a, strong = _VERDICTS[verdict]
    return (score_a if answer_is_a else 1.0 - score_a), (strong_weight if strong else 1)


def judge_conversations(question: str, answer: str, baseline: str) -> tuple[list[dict], list[dict]]:
    """The two judge prompts of one answer: the baseline as A (answer as B), then swapped."""

    def conversation(answer_a: str, answer_b: str) -> list[dict]:
        user = JUDGE_TEMPLATE.format(question=question, answer_a=answer_a, answer_b=answer_b)
        return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]

    return conversation(baseline, answer), conversation(answer, baseline)


@dataclass
class ArenaOutcome:
    """A win rate in percent, its standard error over prompts, extra numbers, and per sample
    what decided it (the two verdicts, or the two reward-model scores)."""

    value: float
    stderr: float
    extra: dict[str, float] = field(default_factory=dict)
    per_sample: list[list[dict[str, Any]]] = field(default_factory=list)


def judged_outcome(
    judgements: Sequence[Sequence[tuple[str, str]]],
    answers: Sequence[Sequence[str]],
    baselines: Sequence[str],
    strong_weight: int = STRONG_WEIGHT,
    style_control: bool = True,
) -> ArenaOutcome:
    """The win rate from each sample's two judgements (baseline as A, then answer as A)."""
    from cascade_rl.metrics import standard_error

    total = weight_sum = 0.0
    per_prompt, per_sample, styled = [], [], []
    unparsed = inconsistent = pairs = 0
    for prompt_judgements, prompt_answers, baseline in zip(judgements, answers, baselines):
        prompt_total = prompt_weight = 0.0
        records = []
        baseline_style = style_counts(baseline)
        for (as_b, as_a), answer in zip(prompt_judgements, prompt_answers):
            verdicts = parse_verdict(as_b), parse_verdict(as_a)
            games = [game(verdicts[0], False, strong_weight), game(verdicts[1], True, strong_weight)]
            for answer_is_a, outcome in zip((False, True), games):
                if outcome is None:
                    unparsed += 1
                    continue
                score, weight = outcome
                prompt_total += score * weight
                prompt_weight += weight
                styled.append(StyledGame(answer_is_a, score, weight, style_counts(answer), baseline_style))
            if None not in games:
                pairs += 1
                inconsistent += (games[0][0] - 0.5) * (games[1][0] - 0.5) < 0
            records.append({"verdict_answer_as_b": verdicts[0], "verdict_answer_as_a": verdicts[1]})
        per_sample.append(records)
        total, weight_sum = total + prompt_total, weight_sum + prompt_weight
        if prompt_weight:
            per_prompt.append(prompt_total / prompt_weight)
    flat_answers = [len(a) for group in answers for a in group]
    mean_answer = sum(flat_answers) / max(len(flat_answers), 1)
    mean_baseline = sum(len(b) for b in baselines) / max(len(baselines), 1)
    raw = 100.0 * total / weight_sum if weight_sum else 0.0
    extra = {
        "raw_win_rate": raw,
        "games": float(2 * len(flat_answers) - unparsed),
        "unparsed_games": float(unparsed),
        "inconsistent_pairs": 100.0 * inconsistent / pairs if pairs else 0.0,
        "length_ratio": mean_answer / mean_baseline if mean_baseline else 0.0,
    }
    value = 100.0 * style_controlled_win_rate(styled) if style_control and styled else raw
    return ArenaOutcome(value, 100.0 * standard_error(per_prompt), extra, per_sample)


_CODE_BLOCK = re.compile(r"```[^`]*```")
_WORD = re.compile(r"\w+|[^\w\s]")
_HEADER = re.compile(r"^#{1,6}\s", re.M)
_LIST_ITEM = re.compile(r"^\s*(?:\d+\.|[-*+])\s", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


def style_counts(answer: str) -> tuple[int, int, int, int]:
    """(length in words and punctuation marks, markdown headers, list items, bold spans) of an
    answer without its code blocks: ArenaHard's style elements."""
    text = _CODE_BLOCK.sub("", answer)
    return len(_WORD.findall(text)), len(_HEADER.findall(text)), len(_LIST_ITEM.findall(text)), len(_BOLD.findall(text))


class StyledGame(NamedTuple):
    """One judged game with the style counts of both answers."""

    answer_is_a: bool
    score: float  # of the evaluated answer: 1 win, 0.5 tie, 0 loss
    weight: int
    answer_style: tuple[int, int, int, int]
    baseline_style: tuple[int, int, int, int]


def style_controlled_win_rate(games: Sequence[StyledGame], l2: float = 0.5) -> float:
    """Win probability of the evaluated answers against the baseline with style held out.

    Bradley-Terry with covariates: P(A wins) = sigmoid(s * theta + gamma . f), s = +1 when the
    evaluated answer is A else -1, f the standardised style ratios of A over B; fitted by
    Newton's method on the weighted, L2-penalised log-likelihood; returns sigmoid(theta)."""
    import numpy as np

    sign = np.array([1.0 if g.answer_is_a else -1.0 for g in games])
    target = np.array([g.score if g.answer_is_a else 1.0 - g.score for g in games])
    weight = np.array([float(g.weight) for g in games])
    mine = np.array([g.answer_style for g in games], dtype=float)
    theirs = np.array([g.baseline_style for g in games], dtype=float)
    a_style = np.where(sign[:, None] > 0, mine, theirs)
    b_style = np.where(sign[:, None] > 0, theirs, mine)
    total = a_style + b_style
    ratios = np.divide(a_style - b_style, total, out=np.zeros_like(total), where=total > 0)
    spread = ratios.std(axis=0)
    kept = spread > 1e-12
    features = (ratios[:, kept] - ratios[:, kept].mean(axis=0)) / spread[kept]
    design = np.column_stack([sign, features])
    params = np.zeros(design.shape[1])
    for _ in range(100):
        probability = 1.0 / (1.0 + np.exp(-design @ params))
        gradient = design.T @ (weight * (target - probability)) - l2 * params
        hessian = (design * (weight * probability * (1 - probability))[:, None]).T @ design + l2 * np.eye(len(params))
        step = np.linalg.solve(hessian, gradient)
        params += step
        if np.abs(step).max() < 1e-10:
            break
    return float(1.0 / (1.0 + np.exp(-params[0])))


def reward_model_outcome(
    prompts: Sequence[Sequence[dict]], samples: Sequence[Sequence[str]], baselines: Sequence[str], reward_model: str
) -> ArenaOutcome:
    """Win rate of the samples against the baselines, as scored by a reward model."""
    from cascade_rl.metrics import standard_error
    from cascade_rl.rewards.preference import rm_scores

    sample_scores = rm_scores(
        [{"messages": p, "response": s} for p, group in zip(prompts, samples) for s in group], reward_model
    )
    baseline_scores = rm_scores([{"messages": p, "response": b} for p, b in zip(prompts, baselines)], reward_model)
    wins, per_prompt, per_sample, cursor = [], [], [], 0
    for index, group in enumerate(samples):
        scores = sample_scores[cursor : cursor + len(group)]
        cursor += len(group)
        base = baseline_scores[index]
        group_wins = [1.0 if value > base else 0.5 if value == base else 0.0 for value in scores]
        wins += group_wins
        per_prompt += [sum(group_wins) / len(group_wins)] if group_wins else []
        per_sample.append([{"rm_score": value, "baseline_rm_score": base} for value in scores])
    extra = {"mean_rm_score": sum(sample_scores) / max(len(sample_scores), 1)}
    value = 100.0 * sum(wins) / max(len(wins), 1)
    return ArenaOutcome(value, 100.0 * standard_error(per_prompt), extra, per_sample)


def question_text(prompt: Sequence[Mapping[str, Any]]) -> str:
    """The user prompt the judge sees: the last user turn, without its mode flag."""
    return last_user_text(list(prompt))


def question_row(row: dict) -> dict:
    """An ArenaHard question row as an RL prompt row: v0.1's ``turns`` (``[{"content"}]``)
    become the user turns; v2's ``prompt`` and rows that already have one are kept."""
    if "prompt" in row or "messages" in row or not isinstance(row.get("turns"), list):
        return row
    turns = [turn.get("content") if isinstance(turn, Mapping) else None for turn in row["turns"]]
    if not turns or not all(isinstance(text, str) for text in turns):
        raise ValueError("turns is not a list of {content} objects")
    out = {k: v for k, v in row.items() if k != "turns"}
    out["prompt"] = [{"role": "user", "content": text} for text in turns]
    return out


def row_key(row: Mapping[str, Any]) -> str | None:
    """A benchmark row's id for joining baseline answers: ``id``, else ArenaHard's
    ``question_id`` or ``uid``."""
    reference = row.get("reference") or {}
    for value in (row.get("id"), reference.get("question_id"), reference.get("uid")):
        if value is not None:
            return str(value)
    return None


def read_baselines(path: Path) -> dict[str, str]:
    """Baseline answers by id from a JSONL file: ``{"id"|"question_id"|"uid", "response"|"answer"}``
    rows, ArenaHard v0.1 ``model_answer`` rows (``choices[0].turns[0].content``) or v2 rows
    (``messages[-1].content.answer``). A line that has neither is an error naming it."""
    if not path.is_file():
        raise FileNotFoundError(f"baseline answers not found: {path}")
    answers: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = next(str(row[name]) for name in ("id", "question_id", "uid") if row.get(name) is not None)
            answers[key] = _baseline_answer(row)
        except (json.JSONDecodeError, StopIteration, KeyError, IndexError, TypeError, AttributeError):
            raise ValueError(
                f"{path}:{number}: expected an id (id / question_id / uid) and an answer (response, answer, "
                "choices[0].turns[0].content or messages[-1].content.answer)"
            ) from None
    return answers


def _baseline_answer(row: Mapping[str, Any]) -> str:
    for name in ("response", "answer"):
        if isinstance(row.get(name), str):
            return row[name]
    if "choices" in row:
        return row["choices"][0]["turns"][0]["content"]
    content = row["messages"][-1]["content"]
    return content["answer"] if isinstance(content, Mapping) else content
