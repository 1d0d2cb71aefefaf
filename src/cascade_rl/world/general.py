"""Toy general chat: requests with parallel thinking / non-thinking answers, reward-model
preference pairs and arena prompts (issue 4; SPEC sections 3, 4 and 6 "RLHF").

Requests are short templates over the topics of :mod:`.vocab` ("Tell me about owls."). The
gold answer is built from the topic's facts; the thinking answer adds a one-line plan.

Preference pairs follow the paper where it fits the toy world (SPEC section 4): the rejected
side of an *off-topic* pair is a good answer to a related-but-different request (same intent
about a sibling topic, or another intent about the same topic), so it looks fine and answers
the wrong question. The other rejected kinds are *verbose* (padding), *repetitive* (one
sentence over and over) and *wrong-language* (Spanish or Russian, or an English answer that
switches language).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from cascade_rl.world.tasks import Task, pick, user
from cascade_rl.world.vocab import TOPICS, TOPICS_BY_CATEGORY, Topic


def is_plural(topic: Topic) -> bool:
    return topic.name.endswith("s") and topic.category != "activity" and topic.name != "chess"


def be(topic: Topic) -> str:
    return "are" if is_plural(topic) else "is"


def title_case(topic: Topic) -> str:
    return topic.name[:1].upper() + topic.name[1:]


def sentence(text: str) -> str:
    """Capitalise the first letter and end with a period."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?", "!")) else ".")


@dataclass(frozen=True)
class Intent:
    """A kind of request: its wording, its answer and its one-line thinking plan."""

    name: str
    wordings: tuple[str, ...]  # str.format with {t} (and {u} for a second topic)
    answer: Callable[[Topic, Topic], str]
    plan: str  # str.format with {t}


def _about(t: Topic, _: Topic) -> str:
    return " ".join(t.facts)


def _two_sentences(t: Topic, _: Topic) -> str:
    return f"{title_case(t)} {be(t)} {t.adjectives[0]} and {t.adjectives[1]}. {t.facts[0]}"


def _why(t: Topic, _: Topic) -> str:
    return f"People like {t.name} because {t.reason}. {t.facts[1]}"


def _tip(t: Topic, _: Topic) -> str:
    return f"Here is a tip: {t.tip}. {t.facts[2]}"


def _one_fact(t: Topic, _: Topic) -> str:
    return t.facts[1]


def _list(t: Topic, _: Topic) -> str:
    return f"1. {t.facts[0]}\n2. {t.facts[2]}"


def _poem(t: Topic, _: Topic) -> str:
    return (
        f"{title_case(t)} so {t.adjectives[0]},\n{t.adjectives[1]} and true,\n"
        f"{t.facts[0][:-1].lower()},\nand I think of you."
    )


def _compare(t: Topic, u: Topic) -> str:
    return (
        f"{title_case(t)} {be(t)} {t.adjectives[0]}, while {u.name} {be(u)} {u.adjectives[0]}. "
        f"{t.facts[0]} {u.facts[0]}"
    )


INTENTS: tuple[Intent, ...] = (
    Intent(
        "about",
        ("Tell me about {t}.", "What do you know about {t}?", "Talk to me about {t}."),
        _about,
        "The user asks about {t}. I will share three facts.",
    ),
    Intent(
        "two",
        ("Describe {t} in two sentences.", "Give me two sentences about {t}."),
        _two_sentences,
        "Two sentences about {t}.",
    ),
    Intent(
        "why",
        ("Why do people like {t}?", "What makes {t} so popular?"),
        _why,
        "The user asks why people like {t}. I give the reason.",
    ),
    Intent("tip", ("Give me a tip about {t}.", "Any advice about {t}?"), _tip, "One tip about {t}."),
    Intent("fact", ("Share one fact about {t}.", "Tell me one thing about {t}."), _one_fact, "One fact about {t}."),
    Intent("list", ("List two facts about {t}.", "Name two facts about {t}."), _list, "Two facts about {t} as a list."),
    Intent(
        "poem", ("Write a short poem about {t}.", "Write me a little poem about {t}."), _poem, "A short poem about {t}."
    ),
    Intent("compare", ("Compare {t} and {u}.", "How do {t} and {u} differ?"), _compare, "Compare {t} with {u}."),
)
INTENTS_BY_NAME = {intent.name: intent for intent in INTENTS}


@dataclass(frozen=True)
class Request:
    intent: Intent
    topic: Topic
    other: Topic  # the second topic of "compare"; a sibling topic otherwise
    wording: int = 0

    @property
    def text(self) -> str:
        return self.intent.wordings[self.wording].format(t=self.topic.name, u=self.other.name)

    @property
    def answer(self) -> str:
        return self.intent.answer(self.topic, self.other)

    @property
    def plan(self) -> str:
        return self.intent.plan.format(t=self.topic.name, u=self.other.name)


def sibling(rng: random.Random, topic: Topic) -> Topic:
    """Another topic of the same category."""
    return pick(rng, [t for t in TOPICS_BY_CATEGORY[topic.category] if t is not topic])


def random_request(rng: random.Random, intents: tuple[Intent, ...] = INTENTS) -> Request:
    topic, intent = pick(rng, TOPICS), pick(rng, intents)
    return Request(intent, topic, sibling(rng, topic), rng.randrange(len(intent.wordings)))


def chat_task(rng: random.Random) -> Task:
    """A general-chat request with its thinking and non-thinking gold answers."""
    request = random_request(rng)
    return Task(
        domain="preference",
        kind=request.intent.name,
        prompt=user(request.text),
        reasoning=request.plan,
        answer=request.answer,
        source="general",
    )


# ---- preference pairs ---------------------------------------------------------------------

FILLERS = (
    "I hope this helps.",
    "Let me know if you want to know more.",
    "This is a very interesting question.",
    "There is always more to say about this.",
    "Many people ask about this.",
    "It is important to remember this.",
    "As I said before, this matters a lot.",
    "Thank you for asking such a good question.",
)
FOREIGN = (
    "Lo siento, no tengo mucho que decir sobre esto.",
    "Es un tema muy interesante para mucha gente.",
    "Это очень интересная тема.",
    "Я думаю, что это хороший вопрос.",
    "Me gusta mucho hablar de esto.",
    "Мне нравится эта тема.",
)
REJECTED_KINDS = ("off_topic", "verbose", "repetitive", "wrong_language")


def off_topic_answer(rng: random.Random, request: Request) -> str:
    """A good answer to a related-but-different request (SPEC section 4, appendix C.1)."""
    if request.intent.name != "compare" and rng.random() < 0.5:
        others = [i for i in INTENTS if i.name not in (request.intent.name, "compare")]
        return Request(pick(rng, others), request.topic, request.other).answer
    topic = sibling(rng, request.topic)
    return Request(request.intent, topic, sibling(rng, topic)).answer


def rejected_answer(rng: random.Random, request: Request, kind: str) -> str:
    good = request.answer
    if kind == "off_topic":
        return off_topic_answer(rng, request)
    if kind == "verbose":
        padding = rng.sample(FILLERS, 3)
        return " ".join([padding[0], good, *padding[1:]])
    if kind == "repetitive":
        first = request.topic.facts[rng.randrange(3)]
        return " ".join([first] * rng.randint(3, 5))
    if kind == "wrong_language":
        if rng.random() < 0.5:
            return " ".join(rng.sample(FOREIGN, 2))
        return f"{good} {pick(rng, FOREIGN)}"
    raise ValueError(f"unknown rejected kind {kind!r}; known: {REJECTED_KINDS}")


def preference_pair(rng: random.Random) -> tuple[Task, str, str]:
    """A request (as a chat task), the kind of its rejected answer and the rejected answer."""
    request = random_request(rng)
    kind = pick(rng, REJECTED_KINDS)
    task = Task(
        domain="preference",
        kind=request.intent.name,
        prompt=user(request.text),
        reasoning=request.plan,
        answer=request.answer,
        source="general",
    )
    return task, kind, rejected_answer(rng, request, kind)
