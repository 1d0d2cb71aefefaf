"""What every stage runner is given and gives back (SPEC section 1: each stage starts from the
previous stage's checkpoint; DESIGN convention 6: stages hand over by directory).

A :class:`StageContext` is one frozen object: the run's settled runtime (every ``auto`` decided
once, :mod:`cascade_rl.train.machine`), its seed, the training and sampling dtypes and the
recipe's path variables, with the stage's own place in the run: its directory, the policy it
starts from, the reward models trained before it and where the run's stages live. A runner
returns a :class:`Handover`: the policy and the reward models the next stage starts from. The
registry of runners by stage kind is :mod:`cascade_rl.train.stages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from cascade_rl.recipe import Recipe, Runtime
from cascade_rl.train import machine


class Dtypes(NamedTuple):
    """The weights' dtype in training and in sampling (rollouts, evaluation, filters), settled."""

    train: str
    sample: str


@dataclass(frozen=True)
class Handover:
    """What a stage leaves the next one: the policy checkpoint and the reward models so far."""

    policy: Path
    reward_models: Mapping[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class StageContext:
    """Everything a stage runs with besides its own recipe section (module docstring)."""

    runtime: Runtime
    seed: int
    dtypes: Dtypes
    stage_dir: Path
    policy: Path
    variables: Mapping[str, str] = field(default_factory=dict)
    reward_models: Mapping[str, Path] = field(default_factory=dict)
    #: this run's stage directories by stage name (a teacher may name a stage)
    stage_dirs: Mapping[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("variables", "reward_models", "stage_dirs"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @classmethod
    def of_recipe(cls, recipe: Recipe, *, stage_dir: Path, policy: Path, **where: Mapping) -> StageContext:
        """The context of a stage of ``recipe`` once :func:`machine.apply` has settled it."""
        model = recipe.model
        return cls(
            runtime=recipe.runtime,
            seed=recipe.seed,
            dtypes=Dtypes(model.dtype, model.sampling_dtype),
            stage_dir=Path(stage_dir),
            policy=Path(policy),
            **where,
        )

    @classmethod
    def settle(
        cls, runtime: Runtime, *, seed: int, stage_dir: Path, policy: Path, dtype: str = "auto", **rest
    ) -> StageContext:
        """A context for one stage called outside a cascade (a library caller, a test), settled by
        the rules the cascade applies at start-up (:mod:`cascade_rl.train.machine`): the dtypes
        (``sample_dtype``: unset = ``dtype``), mixed precision, the LM head and the engine for
        ``policy``. ``rest``: ``sample_dtype`` and the optional fields."""
        sample = rest.pop("sample_dtype", None)
        train = machine.training_dtype(dtype)
        dtypes = Dtypes(train, machine.sampling_dtype(sample, train))
        settled = machine.settle_runtime(runtime, use_vllm=machine.engine(runtime.use_vllm, policy).vllm)
        return cls(settled, seed, dtypes, Path(stage_dir), Path(policy), **rest)

    def next_stage(self, stage_dir: Path, handover: Handover) -> StageContext:
        """The context of the stage after this one, from this one's hand-over."""
        return replace(self, stage_dir=stage_dir, policy=handover.policy, reward_models=handover.reward_models)

    @property
    def handover(self) -> Handover:
        """The hand-over of a stage that trains nothing: what it was given."""
        return Handover(self.policy, self.reward_models)
