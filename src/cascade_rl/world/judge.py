"""Judge-format SFT rows for a toy generative reward model (Nemotron-Cascade 2's pairwise GenRM,
SPEC section 11; issue 45).

Each preference pair of the world (``rm_pairs.jsonl``: a request, the gold answer and a rejected
one) becomes two SFT rows, one per order of the two answers: the user turn is
:data:`JUDGE_TEMPLATE` filled the way the ``genrm`` scorer fills a template
(``rewards.genrm.judge_messages``: the request as ``[user]\\n<text>``, the two answers), and the
assistant turn is the JSON the scorer reads, ``{"score_1": .., "score_2": .., "ranking": ..}``.
A model trained on them is a judge the ``genrm`` domain can call (``genrm.prompt`` set to the
same template); ``tests/world/test_judge_world.py`` pins that the scorer sends exactly these prompts and
reads exactly these answers.

Scores: the gold answer 5; a rejected answer by its kind -- 1 in the wrong language, 2
repetitive or off-topic, 3 verbose (the gold answer between filler sentences). The ranking
follows the gap, 1-3 when the first answer is the better one (gap >= 3: 1, 2: 2, 1: 3) and the
mirror image 6-4 when the second is.

The template is short (a 2-layer model reads the request and two answers of up to 128 tokens
within its 1,024 positions) and ends with the chat format's ` /no_think` flag: the judge answers
with the JSON at once, as its rows teach it, whatever thinking mode the policy was sampled in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

JUDGE_TEMPLATE = (
    "Judge two replies.\n{conversation}\n[reply 1]\n{response_1}\n[reply 2]\n{response_2}\nScores? /no_think"
)
#: the score of the gold answer and of each rejected kind (``world.general.REJECTED_KINDS``)
CHOSEN_SCORE = 5
REJECTED_SCORES = {"wrong_language": 1, "repetitive": 2, "off_topic": 2, "verbose": 3}


def verdict(first_score: int, second_score: int) -> str:
    """The judge's answer for two answers of these scores, as the ``genrm`` parser reads it."""
    gap = abs(first_score - second_score)
    better = 1 if gap >= 3 else 4 - gap  # 1 much better, 2 better, 3 slightly better
    ranking = better if first_score >= second_score else 7 - better
    return json.dumps({"score_1": first_score, "score_2": second_score, "ranking": ranking})


def judge_prompt(prompt: Sequence[Mapping[str, Any]], first: str, second: str) -> str:
    """The judge's user turn for one comparison: :data:`JUDGE_TEMPLATE` filled as the ``genrm``
    scorer fills it (each prompt message as ``[role]\\ncontent``, blank lines between them)."""
    conversation = "\n\n".join(f"[{m.get('role', 'user')}]\n{m.get('content') or ''}" for m in prompt)
    values = {"conversation": conversation, "response_1": first, "response_2": second}
    return JUDGE_TEMPLATE.format(**values)


def judge_rows(pairs: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Two SFT rows per preference pair (``id`` ending with the rejected kind), one per order:
    ``judge-<n>-chosen_first`` and ``judge-<n>-chosen_second``."""
    rows = []
    for index, pair in enumerate(pairs):
        kind = str(pair["id"]).rsplit("-", 1)[-1]
        if kind not in REJECTED_SCORES:
            raise ValueError(f"{pair['id']}: unknown rejected kind {kind!r}; known: {', '.join(REJECTED_SCORES)}")
        chosen, rejected = pair["chosen"][-1]["content"], pair["rejected"][-1]["content"]
        orders = (
            ("chosen_first", chosen, rejected, CHOSEN_SCORE, REJECTED_SCORES[kind]),
            ("chosen_second", rejected, chosen, REJECTED_SCORES[kind], CHOSEN_SCORE),
        )
        for order, first, second, first_score, second_score in orders:
            messages = [
                {"role": "user", "content": judge_prompt(pair["prompt"], first, second)},
                {"role": "assistant", "content": verdict(first_score, second_score)},
            ]
            rows.append({"id": f"judge-{index:05d}-{kind}-{order}", "messages": messages, "source": "general"})
    return rows
