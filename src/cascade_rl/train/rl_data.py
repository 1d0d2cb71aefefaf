"""A GRPO stage's prompts (SPEC sections 5-6): read from the stage's data sources, each row routed
to its reward domain and put in its thinking mode, and the input-context budget of the SWE
curriculum applied. Engine-neutral: the TRL backend (:mod:`cascade_rl.train.grpo`) and the
distillation stage read these rows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cascade_rl.chat import token_count, with_mode
from cascade_rl.data.loading import LoadReport, load_sources, rl_normaliser
from cascade_rl.recipe import GRPOStage
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

    def __post_init__(self) -> None:
        if not self.prompts:
            self.prompts = list(range(self.num_prompts))

    def row_index(self) -> dict[tuple[int, str], int]:
        return {(row["_pidx"], row["_mode"]): i for i, row in enumerate(self.rows)}


def build_rl_data(stage: GRPOStage, *, seed: int, variables: Mapping[str, str] | None = None) -> RLData:
    """The stage's prompts, each row routed to its reward domain (a source's ``domain``, else the
    stage's, else the row's column) and put in its thinking mode (``half``: a row per mode)."""
    prompts, report = load_rl_prompts(stage, seed=seed, variables=variables)
    return rl_data_from(stage, prompts, report)


def load_rl_prompts(
    stage: GRPOStage, *, seed: int, variables: Mapping[str, str] | None = None
) -> tuple[list[dict], LoadReport]:
    """The stage's normalised prompts from all its data sources, and what loading skipped."""
    prompts, report = [], LoadReport()
    for source in stage.data:
        normalise = rl_normaliser(source.domain or stage.domain)
        part, part_report = load_sources([source], normalise, seed=seed, variables=dict(variables or {}))
        prompts += part
        report.merge(part_report)
    return prompts, report


def rl_data_from(stage: GRPOStage, prompts: Sequence[dict], report: LoadReport) -> RLData:
    """Training rows of ``prompts``: one per thinking mode the prompt's domain takes."""
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
    return RLData(rows, len(prompts), report, modes=fixed)


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
    return RLData(data.rows, data.num_prompts, report, kept, data.modes)
