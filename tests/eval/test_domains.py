"""The report's per-domain rollout table: a multi-domain RL stage's reward, pass rate, turns and
tool errors per domain at the start and end of the stage, in report.md and report.json; a stage of
one single-turn domain gets no row."""

import json
from pathlib import Path

import pytest
from test_report import markdown_table

from cascade_rl.eval.report import build_report


def step(number: int) -> dict:
    return {
        "step": number,
        "reward/mean": 0.1 * number,
        "reward/mcqa/mean": 0.1 * number,
        "reward/mcqa/pass_rate": 0.1 * number,
        "reward/workplace/mean": 0.05 * number,
        "reward/workplace/pass_rate": 0.05 * number,
        "reward/workplace/turns": 1.0 + 0.2 * number,
        "reward/workplace/failed_calls": 1.0 / number,
    }


def write_stage(run_dir: Path, folder: str, name: str, metrics: list[dict]) -> None:
    stage = run_dir / folder
    stage.mkdir(parents=True)
    (stage / "stage.json").write_text(json.dumps({"index": 0, "name": name, "kind": "grpo", "wall_s": 1.0,
                                                  "status": "done"}))  # fmt: skip
    (stage / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))


def test_a_multi_domain_stage_reports_each_domain_and_a_single_domain_stage_none(tmp_path):
    write_stage(tmp_path, "01-math", "math", [{"step": n, "reward/math/mean": 0.1 * n} for n in range(1, 7)])
    write_stage(tmp_path, "02-multi_domain", "multi_domain", [step(n) for n in range(1, 7)])
    markdown = build_report(tmp_path).read_text()
    table = markdown_table(markdown, "## Rollouts per domain")
    assert table[0][:4] == ["stage", "domain", "reward first", "reward last"]
    assert table[1:] == [
        ["multi_domain", "mcqa", "20.0", "50.0", "20.0", "50.0", "—", "—", "—", "—"],
        ["multi_domain", "workplace", "10.0", "25.0", "10.0", "25.0", "1.40", "2.00", "0.61", "0.21"],
    ]
    report = json.loads((tmp_path / "report.json").read_text())
    stages = {entry["stage"]: entry for entry in report["stages"]}
    assert "rl_domains" not in stages["math"]
    workplace = stages["multi_domain"]["rl_domains"]["workplace"]
    assert workplace["turns"] == {"first": pytest.approx(1.4), "last": pytest.approx(2.0)}
    assert set(workplace) == {"mean", "pass_rate", "turns", "failed_calls"}
