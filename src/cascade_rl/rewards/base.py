"""The result type every reward scorer returns (DESIGN conventions 1-2).

A scorer is a pure function ``score(response, *, prompt=None, **reference, **options) -> Score``.
``Score.reward`` is the number RL trains on; ``Score.details`` explains it (which constraint
failed, which test, a timeout) and is logged per reward as ``<domain>/<detail>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Score:
    reward: float
    details: dict[str, Any] = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.reward)
