"""The result type every reward scorer returns (DESIGN conventions 1-2).

A scorer is a pure function ``score(response, *, prompt=None, **reference, **options) -> Score``.
``Score.reward`` is the number RL trains on; ``Score.details`` explains it (which constraint
failed, which test, a timeout) and is logged per reward as ``<domain>/<detail>``.

A scorer that could not reach a verdict because something *outside the response* failed (a
sandbox that crashed, a reward or judge server that timed out or answered an error, a judge reply
the domain declares unusable) returns :meth:`Score.no_verdict` instead of a wrong-answer 0: the
reason is kept in :attr:`Score.masked` (and in ``details["no_verdict"]``), and training leaves
such a rollout out of the loss and of its group's statistics, as NVIDIA's environments do with
``mask_sample`` (Nemotron-Cascade 2; SPEC section 11). An infrastructure failure is not a
wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Score:
    reward: float
    details: dict[str, Any] = field(default_factory=dict)
    #: why no verdict could be reached (an infrastructure failure), or None for a real verdict
    masked: str | None = None

    def __float__(self) -> float:
        return float(self.reward)

    @classmethod
    def no_verdict(cls, reason: str, **details: Any) -> Score:
        """No verdict on the response: ``reason`` names the failure (``"sandbox crashed"``,
        ``"judge timed out"``, ...); the reward is 0 only as a placeholder, never trained on."""
        return cls(0.0, {**details, "no_verdict": reason}, masked=reason)
