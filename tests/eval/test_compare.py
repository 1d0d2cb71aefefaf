"""`cascade compare` (SPEC section 1: cascaded RL against one joint RL stage at the same compute):
final values, gains over SFT and largest falls with paired standard errors, cost, the plot, and
the bad inputs (different benchmark sets, an unfinished run)."""

import json
from pathlib import Path

import pytest
from test_report import write_samples
from typer.testing import CliRunner

from cascade_rl.cli import app
from cascade_rl.eval.compare import CompareError, compare, markdown, write_comparison
from cascade_rl.eval.plots import PNG_SIGNATURE

RIGHT, WRONG = [1.0, 1.0], [0.0, 0.0]


def scores(right: int, total: int = 20) -> list[list[float]]:
    """``right`` prompts answered right (both samples), the rest wrong."""
    return [RIGHT] * right + [WRONG] * (total - right)


def make_run(root: Path, name: str, stages: list[tuple[str, str, dict]], recipe_stages: list[str] | None = None):
    """A run directory as `cascade run` writes it: per stage its stage.json, evaluation samples
    and eval.json, two RL steps of 64 rollouts per grpo stage, and recipe.json."""
    run = root / name
    for index, (stage, kind, benchmarks) in enumerate(stages, start=1):
        directory = run / f"{index:02d}-{stage}"
        directory.mkdir(parents=True)
        info = {"index": index, "name": stage, "kind": kind, "status": "done", "wall_s": 60.0 * index}
        (directory / "stage.json").write_text(json.dumps(info))
        for benchmark, per_prompt in benchmarks.items():
            write_samples(directory, benchmark, per_prompt)
        if kind == "grpo":
            steps = [{"step": s, "rollouts/total": 64, "reward/mean": 0.1} for s in (1, 2)]
            (directory / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in steps) + "\n")
    names = recipe_stages or [stage for stage, _, _ in stages]
    (run / "recipe.json").write_text(json.dumps({"name": name, "stages": [{"name": n} for n in names]}))
    return run


@pytest.fixture
def runs(tmp_path):
    """A cascade (math RL then code RL, which costs math 3 prompts) and a joint run from the
    same SFT checkpoint (one RL stage over both)."""
    sft = ("sft", "sft", {"toy-math": scores(4), "toy-code": scores(6)})
    cascade = make_run(
        tmp_path,
        "tiny",
        [
            sft,
            ("math", "grpo", {"toy-math": scores(12), "toy-code": scores(6)}),
            ("code", "grpo", {"toy-math": scores(9), "toy-code": scores(14)}),
        ],
    )
    joint = make_run(tmp_path, "tiny-joint", [sft, ("joint", "grpo", {"toy-math": scores(8), "toy-code": scores(10)})])
    return cascade, joint


def table(text: str, heading: str) -> dict[str, list[str]]:
    lines = text.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return {row[0]: row[1:] for row in [rows[0]] + rows[2:]}


def test_final_values_gains_falls_and_cost_side_by_side(runs, tmp_path):
    cascade, joint = runs
    comparison = compare([cascade, joint])
    text = markdown(comparison)
    final = table(text, "## Final benchmark values")
    assert final["benchmark"] == ["tiny", "tiny-joint", "tiny-joint - tiny"]
    # 9/20 right after the cascade, 8/20 after the joint stage; one prompt differs: paired s.e. 5.0
    assert final["toy-math"] == ["45.0 ± 11.4", "40.0 ± 11.2", "-5.0 ± 5.0"]
    assert final["toy-code"] == ["70.0 ± 10.5", "50.0 ± 11.5", "-20.0 ± 9.2"]
    gains = table(text, "## Gain over SFT")
    assert gains["toy-math"] == ["+25.0 ± 9.9", "+20.0 ± 9.2"]
    falls = table(text, "## Largest fall")
    assert falls["toy-math"] == ["15.0 ± 8.2 (math -> code)", "0.0"]
    assert falls["toy-code"] == ["0.0", "0.0"]
    cost = table(text, "## Cost")
    assert cost["RL steps (updates)"] == ["4", "2"] and cost["RL rollouts"] == ["256", "128"]
    assert cost["RL stages"] == ["math, code", "joint"]
    assert cost["wall time, RL stages"] == ["5m 00s", "2m 00s"]

    path = write_comparison(comparison, tmp_path / "out")
    png = tmp_path / "out" / "compare.png"
    assert png.read_bytes()[:8] == PNG_SIGNATURE and "![comparison](compare.png)" in path.read_text()
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert data["difference_from_tiny"]["tiny-joint"]["toy-math"] == {"value": -5.0, "stderr": pytest.approx(5.0)}
    assert data["runs"][0]["largest_fall"]["toy-math"]["from"] == "math"


def test_cli_prints_and_writes_the_comparison(runs, tmp_path):
    cascade, joint = runs
    result = CliRunner().invoke(app, ["compare", str(cascade), str(joint), "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert "## Gain over SFT" in result.output and "tiny-joint - tiny" in result.output
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["compare.json", "compare.md", "compare.png"]


def test_different_benchmark_sets_compare_the_common_ones_and_name_the_others(runs, tmp_path):
    cascade, _ = runs
    other = make_run(
        tmp_path,
        "other",
        [("sft", "sft", {"toy-math": scores(4), "toy-swe": scores(1)}), ("joint", "grpo", {"toy-math": scores(6)})],
    )
    comparison = compare([cascade, other])
    assert comparison.benchmarks == ["toy-math"]
    notes = comparison.notes()
    assert "toy-code is left out: only in tiny" in notes and "toy-swe is left out: only in other" in notes
    assert "- toy-swe is left out: only in other" in markdown(comparison)
    result = CliRunner().invoke(app, ["compare", str(cascade), str(other), "--out", str(tmp_path / "c")])
    assert result.exit_code == 0 and "toy-code is left out: only in tiny" in result.output


def test_an_unfinished_run_names_its_missing_stages(runs, tmp_path):
    cascade, _ = runs
    half = make_run(
        tmp_path,
        "half",
        [("sft", "sft", {"toy-math": scores(4)}), ("math", "grpo", {"toy-math": scores(9)})],
        recipe_stages=["sft", "math", "code", "swe"],
    )
    (half / "03-code").mkdir()  # killed inside the stage
    with pytest.raises(CompareError, match=r"half has not finished: stage\(s\) code, swe missing"):
        compare([cascade, half])
    result = CliRunner().invoke(app, ["compare", str(cascade), str(half), "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "code, swe missing" in result.output
    comparison = compare([cascade, half], partial=True)
    assert "half is unfinished: stage(s) code, swe missing" in comparison.notes()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda root, run: [run, root / "nowhere"], "nowhere: no such run directory"),
        (lambda root, run: [run], "at least two run directories"),
        (lambda root, run: [run, run], "different names"),
    ],
)
def test_bad_run_lists_are_named(runs, tmp_path, make, message):
    with pytest.raises(CompareError, match=message):
        compare(make(tmp_path, runs[0]))


def test_runs_with_no_benchmark_in_common_are_refused(runs, tmp_path):
    other = make_run(tmp_path, "other", [("sft", "sft", {"toy-swe": scores(1)}), ("j", "grpo", {"toy-swe": scores(2)})])
    with pytest.raises(CompareError, match="no benchmark in common"):
        compare([runs[0], other])
