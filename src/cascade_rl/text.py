"""The project's definition of a word: lower-cased runs of letters and digits, so punctuation,
spacing and ``snake_case`` do not hide a match (SPEC section 3, data hygiene).

Every n-gram comparison uses it: dedup and 9-gram decontamination of ``cascade data``
(:mod:`cascade_rl.data.hygiene`, which re-exports :func:`words`) and the toy world's
decontamination (:mod:`cascade_rl.world.decontam`). It sits at the ground of the layer map
(DESIGN.md, "Layers") because the world is built below the data tools that use it.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[0-9a-z\u00c0-\uffff]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())
