"""A GRPO stage's prompts (SPEC sections 5-6): read from the stage's data sources (or a curriculum
step's own: IF-RL's second taxonomy, the SWE set built for a sub-stage's input context), each row
routed to its reward domain and put in its thinking mode, and the input-context budget of the SWE
curriculum applied. Engine-neutral: the TRL backend (:mod:`cascade_rl.train.grpo`) and the
distillation stage read these rows.

A stage trains one or more *data sets*: the stage's ``data`` and each sub-stage's own. Two
sub-stages train the same set when their sources are the same settings (:func:`data_key`); the
prompt schedule's state (epoch, dynamic filter) belongs to a set (``train/grpo.py``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cascade_rl.chat import token_count, with_mode
from cascade_rl.data.loading import LoadReport, load_routed_sources, rl_normaliser
from cascade_rl.recipe import DataSource, GRPOStage
from cascade_rl.train.filtering import MODES


@dataclass
class RLData:
    """The stage's prompts as TRL rows (one per prompt and thinking mode) and how they loaded.
    ``prompts`` are the prompt indices a sub-stage may draw (all of them, unless an
    input-context budget leaves some out)."""

    rows: list[dict]
    num_prompts: int
    report: LoadReport
    prompts: list[int] = field(default_factory=list)
    #: prompts whose thinking mode their reward domain fixes (a stage with per-domain modes)
    modes: dict[int, str] = field(default_factory=dict)
    #: which data set these are (:func:`data_key` of its sources)
    key: str = ""

    def __post_init__(self) -> None:
        if not self.prompts:
            self.prompts = list(range(self.num_prompts))

    def row_index(self) -> dict[tuple[int, str], int]:
        return {(row["_pidx"], row["_mode"]): i for i, row in enumerate(self.rows)}


def data_key(sources: Sequence[DataSource]) -> str:
    """A short name of a data set: equal for two lists of sources with the same settings."""
    text = json.dumps([source.model_dump(mode="json") for source in sources], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_rl_data(
    stage: GRPOStage,
    *,
    seed: int,
    variables: Mapping[str, str] | None = None,
    sources: Sequence[DataSource] | None = None,
) -> RLData:
    """The stage's prompts (or those of ``sources``), each row routed to its reward domain (a
    source's ``domain``, else the stage's, else the row's column) and put in its thinking mode
    (``half``: a row per mode)."""
    prompts, report = load_rl_prompts(stage, seed=seed, variables=variables, sources=sources)
    return rl_data_from(stage, prompts, report, key=data_key(stage.data if sources is None else sources))


def load_rl_prompts(
    stage: GRPOStage,
    *,
    seed: int,
    variables: Mapping[str, str] | None = None,
    sources: Sequence[DataSource] | None = None,
) -> tuple[list[dict], LoadReport]:
    """The normalised prompts of ``sources`` (the stage's data unless given; each row rewarded by
    its source's domain, else the stage's), and what loading skipped."""
    return load_routed_sources(
        stage.data if sources is None else sources,
        lambda source: rl_normaliser(source.domain or stage.domain),
        seed=seed,
        variables=dict(variables or {}),
    )


def rl_data_from(stage: GRPOStage, prompts: Sequence[dict], report: LoadReport, *, key: str = "") -> RLData:
    """Training rows of ``prompts`` (the data set ``key``): one per thinking mode the prompt's domain takes."""
    rows, fixed = [], {}
    for index, prompt in enumerate(prompts):
        domain_mode = stage.mode_of(prompt["domain"])
        if domain_mode != "half" and isinstance(stage.thinking, dict):
            fixed[index] = domain_mode
        for mode in MODES if domain_mode == "half" else (domain_mode,):
            rows.append(
                {
                    "prompt": with_mode(prompt["prompt"], mode),
                    "_ref": json.dumps(prompt["reference"]),
                    "_pidx": index,
                    "_mode": mode,
                    "_domain": prompt["domain"],
                }
            )
    return RLData(rows, len(prompts), report, modes=fixed, key=key)


def drop_long_prompts(data: RLData, tokenizer: Any, limit: int | None) -> RLData:
    """Keep prompts whose rendered length fits the input-context budget (SWE curriculum). The
    rows and prompt numbers stay: the schedule just stops drawing the prompts left out."""
    if limit is None:
        return data
    too_long = {
        row["_pidx"] for row in data.rows if token_count(tokenizer, row["prompt"], add_generation_prompt=True) > limit
    }
    if not too_long:
        return data
    report = LoadReport(
        read=data.report.read,
        kept=data.num_prompts - len(too_long),
        skipped=data.report.skipped.copy(),
        examples=dict(data.report.examples),
    )
    report.skipped[f"prompt longer than {limit} tokens"] += len(too_long)
    kept = [p for p in range(data.num_prompts) if p not in too_long]
    if not kept:
        raise ValueError(f"every prompt is longer than max_prompt_length {limit} tokens")
    return RLData(data.rows, data.num_prompts, report, kept, data.modes, data.key)
