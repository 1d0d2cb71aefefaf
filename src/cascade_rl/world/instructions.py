"""Toy instruction following: chat requests carrying 1-3 verifiable IFEval constraints
(issue 4; SPEC section 6 "IF-RL").

The request is a general-chat request (:mod:`.general`); the constraints come from the IFEval
registry and are the ones a tiny model can learn: lowercase, no commas, an end phrase, a
keyword, quotation marks, a ``<<title>>``, a word limit, a postscript, bullet points. Their
text is the registry's own description (``build_description``, IFEval's wording), so the toy
prompts read like IFEval prompts and the rows carry IFEval's ``instruction_id_list`` /
``kwargs`` for ``rewards.ifeval``.

The gold answer is the general-chat answer rewritten to satisfy every constraint, in a fixed
order (content, bullets, keyword sentence, length, title, postscript, end phrase, quotes,
commas, case). Pairs that contradict each other (quotes with an end phrase or bullets; bullets
with a word limit) are never drawn together.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cascade_rl.world.general import INTENTS_BY_NAME, Request, sibling, title_case
from cascade_rl.world.tasks import Task, pick, user
from cascade_rl.world.vocab import TOPICS

LOWERCASE = "change_case:english_lowercase"
NO_COMMA = "punctuation:no_comma"
END_PHRASE = "startend:end_checker"
KEYWORD = "keywords:existence"
QUOTATION = "startend:quotation"
TITLE = "detectable_format:title"
WORD_LIMIT = "length_constraints:number_words"
POSTSCRIPT = "detectable_content:postscript"
BULLETS = "detectable_format:number_bullet_lists"

#: The instructions of the toy world (a subset of IFEval's 25 that a tiny model can learn).
INSTRUCTION_IDS = (LOWERCASE, NO_COMMA, END_PHRASE, KEYWORD, QUOTATION, TITLE, WORD_LIMIT, POSTSCRIPT, BULLETS)
CONFLICTS = frozenset(
    {frozenset({QUOTATION, END_PHRASE}), frozenset({QUOTATION, BULLETS}), frozenset({BULLETS, WORD_LIMIT})}
)

END_PHRASES = (
    "Any other questions?",
    "Is there anything else I can help with?",
    "That is all.",
    "Have a nice day.",
    "Thanks for reading.",
    "Let me know if you have more questions.",
)
KEYWORDS = (
    "sunlight",
    "journey",
    "history",
    "family",
    "music",
    "morning",
    "balance",
    "memory",
    "friendship",
    "adventure",
    "patience",
    "wonder",
    "silence",
    "harmony",
    "courage",
    "freedom",
)
POSTSCRIPT_MARKERS = ("P.S.", "P.P.S")
WORD_LIMITS = (
    ("less than", 12),
    ("less than", 20),
    ("less than", 30),
    ("at least", 25),
    ("at least", 35),
    ("at least", 45),
)
#: Requests whose answers are prose sentences (poems and lists would fight the constraints).
BASE_INTENTS = ("about", "two", "why", "tip", "fact")

#: IFEval's descriptions, used until ``cascade_rl.rewards.ifeval`` provides ``build_description``.
_IFEVAL_WORDING = {
    LOWERCASE: "Your entire response should be in English, and in all lowercase letters. "
    "No capital letters are allowed.",
    NO_COMMA: "In your entire response, refrain from the use of any commas.",
    END_PHRASE: "Finish your response with this exact phrase {end_phrase}. No other words should follow this phrase.",
    KEYWORD: "Include keywords {keywords} in the response.",
    QUOTATION: "Wrap your entire response with double quotation marks.",
    TITLE: "Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>.",
    WORD_LIMIT: "Answer with {relation} {num_words} words.",
    POSTSCRIPT: "At the end of your response, please explicitly add a postscript starting with {postscript_marker}",
    BULLETS: "Your answer must contain exactly {num_bullets} bullet points. Use the markdown "
    "bullet points such as:\n* This is point 1. \n* This is point 2",
}


def describe(instruction_id: str, kwargs: Mapping[str, Any]) -> str:
    """The instruction's text: the IFEval registry's ``build_description`` when it is there."""
    try:
        from cascade_rl.rewards.ifeval import build_description  # type: ignore[attr-defined]
    except ImportError:
        if instruction_id not in _IFEVAL_WORDING:
            raise ValueError(f"no description for instruction {instruction_id!r}") from None
        return _IFEVAL_WORDING[instruction_id].format(**kwargs)
    return build_description(instruction_id, dict(kwargs))


@dataclass
class Draft:
    """The answer being rewritten: body sentences, then the decorations around them."""

    sentences: list[str]
    topic_name: str
    bullets: bool = False
    keyword_sentence: str = ""
    title: str = ""
    postscript: str = ""
    ending: str = ""
    notes: list[str] = field(default_factory=list)  # the thinking plan, one note per constraint

    def render(self) -> str:
        body = "\n".join(f"* {s}" for s in self.sentences) if self.bullets else " ".join(self.sentences)
        if self.keyword_sentence:
            body += ("\n" if self.bullets else " ") + self.keyword_sentence
        parts = [f"<<{self.title}>>"] if self.title else []
        parts.append(body)
        if self.postscript:
            parts.append(self.postscript)
        text = "\n\n".join(parts)
        return f"{text}\n{self.ending}" if self.ending else text


def kwargs_choices(instruction_id: str) -> list[dict[str, Any]]:
    """Every kwargs value the toy world may draw for ``instruction_id``."""
    if instruction_id == END_PHRASE:
        return [{"end_phrase": phrase} for phrase in END_PHRASES]
    if instruction_id == KEYWORD:
        return [{"keywords": [word]} for word in KEYWORDS]
    if instruction_id == WORD_LIMIT:
        return [{"relation": relation, "num_words": number} for relation, number in WORD_LIMITS]
    if instruction_id == POSTSCRIPT:
        return [{"postscript_marker": marker} for marker in POSTSCRIPT_MARKERS]
    if instruction_id == BULLETS:
        return [{"num_bullets": count} for count in range(2, 5)]
    return [{}]


def draw_kwargs(rng: random.Random, instruction_id: str) -> dict[str, Any]:
    return pick(rng, kwargs_choices(instruction_id))


def all_descriptions() -> list[str]:
    """Every instruction text the toy world can put into a prompt (decontamination treats
    them as scaffolding: they are the registry's wording, shared by all instances)."""
    return [describe(i, k) for i in INSTRUCTION_IDS for k in kwargs_choices(i)]


def _word_count(text: str) -> int:
    return len(re.findall(r"\w+", text))


def draw_constraints(rng: random.Random, count: int) -> list[str]:
    """``count`` compatible instruction ids in random order."""
    chosen: list[str] = []
    candidates = list(INSTRUCTION_IDS)
    rng.shuffle(candidates)
    for instruction in candidates:
        if len(chosen) == count:
            break
        if any(frozenset({instruction, other}) in CONFLICTS for other in chosen):
            continue
        chosen.append(instruction)
    return chosen


def _pool(request: Request) -> list[str]:
    """Sentences the answer may use, the request's own answer first."""
    topic = request.topic
    own = re.findall(r"[^.!?]+[.!?]", request.answer)
    extra = [f"People like {topic.name} because {topic.reason}.", *topic.facts, f"A good tip is to {topic.tip}."]
    return [s.strip() for s in own] + [s for s in extra if s not in request.answer]


def satisfy(request: Request, ids: list[str], kwargs: list[dict[str, Any]]) -> Draft:
    """The request's answer rewritten to follow every instruction."""
    pool = _pool(request)
    given = dict(zip(ids, kwargs))
    draft = Draft(pool[: max(1, len(re.findall(r"[.!?]", request.answer)))], request.topic.name)
    if BULLETS in given:
        count = given[BULLETS]["num_bullets"]
        draft.sentences, draft.bullets = pool[:count], True
        draft.notes.append(f"{count} bullet points")
    if KEYWORD in given:
        word = given[KEYWORD]["keywords"][0]
        draft.keyword_sentence = f"It makes me think of {word}."
        draft.notes.append(f"use the word {word}")
    if TITLE in given:
        draft.title = title_case(request.topic)
        draft.notes.append("a title in << >>")
    if POSTSCRIPT in given:
        marker = given[POSTSCRIPT]["postscript_marker"]
        draft.postscript = f"{marker} I hope you enjoy {request.topic.name}."
        draft.notes.append(f"end with a postscript {marker}")
    if END_PHRASE in given:
        draft.ending = given[END_PHRASE]["end_phrase"]
        draft.notes.append(f"finish with: {draft.ending}")
    if WORD_LIMIT in given:
        _fit_length(draft, pool, **given[WORD_LIMIT])
    return draft


def _fit_length(draft: Draft, pool: list[str], *, relation: str, num_words: int) -> None:
    """Drop trailing sentences (less than) or add sentences from the pool (at least)."""
    if relation == "less than":
        while _word_count(draft.render()) >= num_words and len(draft.sentences) > 1:
            draft.sentences.pop()
        draft.notes.append(f"fewer than {num_words} words")
    else:
        for extra in pool:
            if _word_count(draft.render()) >= num_words:
                break
            if extra not in draft.sentences:
                draft.sentences.append(extra)
        draft.notes.append(f"at least {num_words} words")


def finish(text: str, ids: list[str]) -> str:
    """The character-level instructions, applied last: quotes, no commas, lowercase."""
    if QUOTATION in ids:
        text = f'"{text}"'
    if NO_COMMA in ids:
        text = text.replace(",", "")
    if LOWERCASE in ids:
        text = text.lower()
    return text


def follows_all(text: str, ids: list[str], kwargs: list[dict[str, Any]]) -> bool:
    """A local check of the gold answer (the real verdict is ``rewards.ifeval``'s): length
    limits are the only instructions the rewrite can miss (a single long sentence)."""
    for instruction, arguments in zip(ids, kwargs):
        if instruction == WORD_LIMIT:
            count = _word_count(text)
            if (count < arguments["num_words"]) != (arguments["relation"] == "less than"):
                return False
    return True


NOTES = {LOWERCASE: "all lowercase", NO_COMMA: "no commas", QUOTATION: "wrap it in double quotes"}


def if_task(rng: random.Random, *, max_constraints: int = 3) -> Task:
    """An instruction-following task (domain ``ifeval``) with 1..max_constraints constraints."""
    for _ in range(100):
        topic = pick(rng, TOPICS)
        intent = INTENTS_BY_NAME[pick(rng, BASE_INTENTS)]
        request = Request(intent, topic, sibling(rng, topic), rng.randrange(len(intent.wordings)))
        ids = draw_constraints(rng, rng.randint(1, max_constraints))
        kwargs = [draw_kwargs(rng, i) for i in ids]
        draft = satisfy(request, ids, kwargs)
        answer = finish(draft.render(), ids)
        if follows_all(answer, ids, kwargs):
            break
    else:  # pragma: no cover - the pool always holds enough sentences
        raise RuntimeError("could not draw a satisfiable instruction-following task")
    notes = [NOTES[i] for i in ids if i in NOTES] + draft.notes
    text = " ".join([request.text, *(describe(i, k) for i, k in zip(ids, kwargs))])
    return Task(
        domain="ifeval",
        kind="+".join(sorted(i.split(":")[1] for i in ids)),
        prompt=user(text),
        reasoning="Rules: " + "; ".join(n.rstrip(".?!") for n in notes) + ".",
        answer=answer,
        source="general",
        reference={"instruction_id_list": ids, "kwargs": kwargs},
    )
