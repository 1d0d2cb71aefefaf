"""Toy tool calling: requests answered with ``<tool_call>`` blocks (issue 4; SPEC sections 2-3).

Each task shows two or three tools (OpenAI-style JSON schemas, rendered into the system prompt
by the chat template) and a user request. The gold answer calls the right tool with the
arguments copied from the request; some requests ask for two calls at once, and some match no
tool and are answered in words (``expected_calls == []``). Assistant turns carry their calls
in ``tool_calls`` (arguments JSON-encoded, as in the OpenAI API), so the template renders
them exactly as the model must write them; the ``tool-call`` benchmark scores them with
:mod:`cascade_rl.rewards.tool_call`. Benchmark and RL rows keep ``tools`` beside the prompt;
loading writes them into the prompt's system message (:func:`cascade_rl.chat.with_tools`), so
the model sees the same tool list at evaluation and RL time as in SFT.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cascade_rl.world.general import random_request
from cascade_rl.world.tasks import Task, pick, user
from cascade_rl.world.vocab import CITIES, CURRENCIES, LANGUAGES, NAMES, SONGS

MESSAGES = (
    "I am running late",
    "dinner is ready",
    "see you at noon",
    "the meeting moved",
    "call me back",
    "happy birthday",
    "I found your keys",
    "the bus is here",
)
PHRASES = (
    "good morning",
    "thank you",
    "where is the station",
    "how much is it",
    "see you soon",
    "I like tea",
    "the water is cold",
    "open the door",
)


def _schema(name: str, description: str, properties: dict[str, dict], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _string(enum: tuple[str, ...] | None = None) -> dict:
    return {"type": "string", **({"enum": list(enum)} if enum else {})}


TOOL_SCHEMAS: dict[str, dict] = {
    schema["function"]["name"]: schema
    for schema in (
        _schema(
            "get_weather",
            "Get the current weather in a city.",
            {"city": _string(), "unit": _string(("celsius", "fahrenheit"))},
            ["city"],
        ),
        _schema("get_time", "Get the local time in a city.", {"city": _string()}, ["city"]),
        _schema(
            "convert_currency",
            "Convert an amount of money.",
            {"amount": {"type": "number"}, "from_currency": _string(), "to_currency": _string()},
            ["amount", "from_currency", "to_currency"],
        ),
        _schema("set_alarm", "Set an alarm (HH:MM).", {"time": _string()}, ["time"]),
        _schema("send_message", "Send a text message.", {"to": _string(), "text": _string()}, ["to", "text"]),
        _schema("play_song", "Play a song.", {"title": _string()}, ["title"]),
        _schema(
            "translate_text",
            "Translate text into another language.",
            {"text": _string(), "target_language": _string()},
            ["text", "target_language"],
        ),
    )
}


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.arguments)}


def _weather(rng: random.Random) -> tuple[str, list[Call]]:
    city = pick(rng, CITIES)
    if rng.random() < 0.4:
        unit = pick(rng, ("celsius", "fahrenheit"))
        return (
            pick(rng, ("What is the weather in {c} in {u}?", "How warm is {c} right now, in {u}?")).format(
                c=city, u=unit
            ),
            [Call("get_weather", {"city": city, "unit": unit})],
        )
    text = pick(rng, ("What is the weather in {c}?", "Is it raining in {c}?", "How is the weather in {c} today?"))
    return text.format(c=city), [Call("get_weather", {"city": city})]


def _two_cities(rng: random.Random) -> tuple[str, list[Call]]:
    first, second = rng.sample(CITIES, 2)
    return (
        f"What is the weather in {first} and in {second}?",
        [Call("get_weather", {"city": first}), Call("get_weather", {"city": second})],
    )


def _time(rng: random.Random) -> tuple[str, list[Call]]:
    city = pick(rng, CITIES)
    text = pick(rng, ("What time is it in {c}?", "Tell me the time in {c}."))
    return text.format(c=city), [Call("get_time", {"city": city})]


def _currency(rng: random.Random) -> tuple[str, list[Call]]:
    amount = rng.randint(2, 500)
    source, target = rng.sample(CURRENCIES, 2)
    text = pick(rng, ("Convert {a} {s} to {t}.", "How much is {a} {s} in {t}?"))
    return (
        text.format(a=amount, s=source, t=target),
        [Call("convert_currency", {"amount": amount, "from_currency": source, "to_currency": target})],
    )


def _alarm(rng: random.Random) -> tuple[str, list[Call]]:
    time = f"{rng.randint(5, 11):02d}:{pick(rng, ('00', '15', '30', '45'))}"
    text = pick(rng, ("Wake me up at {t}.", "Set an alarm for {t}."))
    return text.format(t=time), [Call("set_alarm", {"time": time})]


def _message(rng: random.Random) -> tuple[str, list[Call]]:
    name, message = pick(rng, NAMES), pick(rng, MESSAGES)
    text = pick(rng, ("Text {n} that {m}.", "Send {n} a message: {m}."))
    return text.format(n=name, m=message), [Call("send_message", {"to": name, "text": message})]


def _song(rng: random.Random) -> tuple[str, list[Call]]:
    title = pick(rng, SONGS)
    text = pick(rng, ("Play {s}.", "Put on the song {s}.", "I want to hear {s}."))
    return text.format(s=title), [Call("play_song", {"title": title})]


def _translate(rng: random.Random) -> tuple[str, list[Call]]:
    phrase, language = pick(rng, PHRASES), pick(rng, LANGUAGES)
    text = pick(rng, ("Translate '{p}' into {l}.", "How do you say '{p}' in {l}?"))
    return (text.format(p=phrase, l=language), [Call("translate_text", {"text": phrase, "target_language": language})])


REQUESTS: dict[str, tuple[Callable[[random.Random], tuple[str, list[Call]]], float]] = {
    "weather": (_weather, 2),
    "two_cities": (_two_cities, 1),
    "time": (_time, 1),
    "currency": (_currency, 1.5),
    "alarm": (_alarm, 1),
    "message": (_message, 1.5),
    "song": (_song, 1),
    "translate": (_translate, 1.5),
}
NO_TOOL_WEIGHT = 1.0


def tool_task(rng: random.Random) -> Task:
    """A tool-calling task (domain ``tool_call``) with its tools and expected calls."""
    kinds = sorted(REQUESTS) + ["no_tool"]
    weights = [REQUESTS[k][1] for k in sorted(REQUESTS)] + [NO_TOOL_WEIGHT]
    kind = rng.choices(kinds, weights=weights)[0]
    if kind == "no_tool":
        request = random_request(rng)
        text, calls, plain = request.text, [], request.answer
        plan = "No tool fits this request, so I answer directly."
    else:
        text, calls = REQUESTS[kind][0](rng)
        plain = ""
        plan = f"The user needs {calls[0].name}, so I call it{' twice' if len(calls) > 1 else ''}."
    needed = {call.name for call in calls}
    others = [name for name in sorted(TOOL_SCHEMAS) if name not in needed]
    shown = sorted(needed | set(rng.sample(others, 1)))
    rng.shuffle(shown)
    expected = [call.as_dict() for call in calls]
    return Task(
        domain="tool_call",
        kind=kind,
        prompt=user(text),
        reasoning=plan,
        answer=plain,
        source="tool",
        tools=tuple(TOOL_SCHEMAS[name] for name in shown),
        tool_calls=tuple(expected),
        reference={"expected_calls": expected},
    )
