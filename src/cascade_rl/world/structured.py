"""Toy structured-output tasks (issue 44; SPEC section 11, Nemotron-Cascade 2's structured output at
toy scale): a short fact about a person, to be written as a JSON (or YAML) document that follows
a schema given in the prompt.

Each task draws which of five fields the schema asks for (a name, an age, a city, whether the
person is a student, their pets), in which order, and the document type. The row keeps NeMo
Gym's fields (``schema_str``, ``schema_type``), so :mod:`cascade_rl.rewards.structured` scores it
as it scores NVIDIA's rows: whole-document parsing, every property required, no other property.
"""

from __future__ import annotations

import json
import random
from typing import Any

from cascade_rl.world.tasks import Task, pick, user
from cascade_rl.world.vocab import CITIES, NAMES

PETS = ("cat", "dog", "fish", "bird")
FIELDS: dict[str, dict[str, Any]] = {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "city": {"type": "string"},
    "student": {"type": "boolean"},
    "pets": {"type": "array", "items": {"type": "string"}},
}


#: the fixed text of every request (left out when the world decontaminates: :func:`.build.scaffolding`)
SCAFFOLDING = ("\nWrite this as a ", " document with only these fields: ", " is not a student and has ",
               " is a student and has ")  # fmt: skip


def _fact(person: dict[str, Any]) -> str:
    pets = " and a ".join(person["pets"]) if person["pets"] else ""
    return (
        f"{person['name']} is {person['age']}, lives in {person['city']}, "
        f"{'is' if person['student'] else 'is not'} a student and has {'a ' + pets if pets else 'no pets'}."
    )


def _yaml(document: dict[str, Any]) -> str:
    lines = []
    for key, value in document.items():
        if isinstance(value, list):
            lines.append(f"{key}: [{', '.join(value)}]")
        elif isinstance(value, bool):
            lines.append(f"{key}: {'true' if value else 'false'}")
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def structured_task(rng: random.Random) -> Task:
    """A structured-output task (domain ``structured_output``) with its gold document."""
    person = {
        "name": pick(rng, NAMES),
        "age": rng.randint(18, 70),
        "city": pick(rng, CITIES),
        "student": rng.random() < 0.4,
        "pets": rng.sample(PETS, rng.randint(0, 2)),
    }
    keys = rng.sample(sorted(FIELDS), rng.randint(2, 4))
    kind = "yaml" if rng.random() < 0.25 else "json"
    schema = {"type": "object", "properties": {key: FIELDS[key] for key in keys}}
    document = {key: person[key] for key in keys}
    answer = json.dumps(document) if kind == "json" else _yaml(document)
    wanted = ", ".join(f"{key} ({FIELDS[key]['type']})" for key in keys)
    request = f"{_fact(person)}\nWrite this as a {kind.upper()} document with only these fields: {wanted}."
    return Task(
        domain="structured_output",
        kind=f"{kind}{len(keys)}",
        prompt=user(request),
        answer=answer,
        source="general",
        reference={"schema_str": json.dumps(schema), "schema_type": kind},
    )
