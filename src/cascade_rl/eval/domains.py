"""Per-domain rollout metrics of the RL stages in the run report (Nemotron-Cascade 2's multi-domain
RL, SPEC section 11: one stage mixes STEM multiple choice, the workplace assistant and structured
output, each row rewarded by its own domain).

The trainer logs, per step and per reward domain, the mean reward (``reward/<domain>/mean``), the
pass rate (``reward/<domain>/pass_rate``: rollouts reaching reward 1) and, for a multi-turn domain,
the model turns and the tool errors per episode (``reward/<domain>/turns``, ``failed_calls``).
This module turns them into the report's table: for every RL stage whose rollouts span several
domains or play episodes, each domain's first and last steps (means over :data:`TREND_STEPS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cascade_rl.eval.runs import TREND_STEPS, RunSummary, StageRecord, trend
from cascade_rl.eval.tables import format_table

#: per domain, the metrics the table shows: (metric suffix, column title)
COLUMNS = (("mean", "reward"), ("pass_rate", "pass rate"), ("turns", "turns"), ("failed_calls", "tool errors"))


def stage_domains(row: StageRecord) -> list[str]:
    """The reward domains an RL stage logged, in the order they first appear."""
    seen: dict[str, None] = {}
    for record in row.metrics:
        for key in record:
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "reward" and parts[2] == "mean":
                seen.setdefault(parts[1], None)
    return list(seen)


def domain_trends(row: StageRecord) -> dict[str, dict[str, dict[str, float]]]:
    """Per domain and metric, ``{"first", "last"}`` (only where the stage logged it); empty for a
    stage of one single-turn domain, whose reward curve says it all."""
    domains = stage_domains(row)
    trends: dict[str, dict[str, dict[str, float]]] = {}
    for domain in domains:
        for suffix, _ in COLUMNS:
            found = trend(row.metrics, f"reward/{domain}/{suffix}")
            if found:
                trends.setdefault(domain, {})[suffix] = {"first": found[0], "last": found[1]}
    multi_turn = any("turns" in metrics for metrics in trends.values())
    return trends if len(domains) > 1 or multi_turn else {}


def domains_section(summary: RunSummary) -> list[str]:
    """The report's per-domain table (markdown lines), empty when no stage needs one."""
    table: list[list[Any]] = []
    for row in summary.rows:
        if row.kind != "grpo" or not row.metrics:
            continue
        for domain, metrics in domain_trends(row).items():
            table.append([row.name, domain, *_cells(metrics)])
    if not table:
        return []
    headers = ["stage", "domain"] + [f"{title} {end}" for _, title in COLUMNS for end in ("first", "last")]
    return [
        "## Rollouts per domain (RL stages)",
        "",
        f"Mean of the first and last {TREND_STEPS} steps: reward and pass rate (rollouts at reward 1) in percent, "
        "and for multi-turn domains the model turns and the tool errors (calls that could not run) per episode.",
        "",
        format_table(table, headers),
        "",
    ]


def _cells(metrics: dict[str, dict[str, float]]) -> Sequence[str | None]:
    """Reward and pass rate in percent (the report's unit), turns and tool errors with two decimals."""
    cells = []
    for suffix, _ in COLUMNS:
        for end in ("first", "last"):
            value = metrics.get(suffix, {}).get(end)
            scale = 100.0 if suffix in ("mean", "pass_rate") else 1.0
            cells.append(None if value is None else f"{scale * value:.{1 if scale > 1 else 2}f}")
    return cells
