"""Steps of an RL stage that learned nothing (issue 42, item 6): said in the stage's console
summary and in the run's report."""

import json

from cascade_rl.eval.learning import IDLE_WINDOW, idleness, learning_note


def steps(zero_variance: list[float], share: list[float] | None = None) -> list[dict]:
    return [
        {"step": i + 1, "zero_variance_groups": z, **({"train/learning_share": share[i]} if share else {})}
        for i, z in enumerate(zero_variance)
    ]


def test_a_stage_in_which_no_group_had_variance_learned_nothing():
    note = learning_note("ifrl", steps([1.0] * 3))
    assert note == (
        "ifrl learned nothing: in all 3 logged steps every group's rollouts scored alike "
        "(zero variance: no advantage, no policy gradient)"
    )
    assert learning_note("code", steps([0.5, 1.0], share=[0.0, 0.0])).startswith("code learned nothing: in all 2")
    assert learning_note("math", []) == "math learned nothing: no training step was logged (no update of the weights)"


def test_a_long_stretch_without_variance_is_named_and_a_short_one_is_not():
    zero = [0.5] * 3 + [1.0] * IDLE_WINDOW + [0.75] + [1.0] * (IDLE_WINDOW - 1) + [0.0]
    found = idleness(steps(zero))
    assert (found.steps, found.idle, found.windows) == (len(zero), 2 * IDLE_WINDOW - 1, [(4, 8, IDLE_WINDOW)])
    assert learning_note("rlhf", steps(zero)) == (
        f"rlhf learned nothing in steps 4-8 ({IDLE_WINDOW} of {len(zero)} logged steps): every group's rollouts "
        "scored alike (zero variance: no advantage, no policy gradient)"
    )
    assert learning_note("rlhf", steps([0.9, 1.0, 0.2])) is None


def test_the_report_and_its_summary_say_which_stage_learned_nothing(tmp_path, capsys):
    from rich.console import Console

    from cascade_rl.eval.report import build_report, print_summary

    for index, (name, zero) in enumerate([("ifrl", [1.0] * 4), ("code", [0.2, 0.4])], start=1):
        stage = tmp_path / f"0{index}-{name}"
        stage.mkdir()
        status = {"index": index, "name": name, "kind": "grpo", "status": "done", "wall_s": 1.0}
        (stage / "stage.json").write_text(json.dumps(status))
        (stage / "eval.json").write_text(json.dumps({"b": 10.0 * index}))
        (stage / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps(zero)))
    report = build_report(tmp_path)
    text = report.read_text()
    assert "## Steps that learned nothing" in text and "⚠ ifrl learned nothing: in all 4 logged steps" in text
    assert "code learned nothing" not in text
    data = json.loads(report.with_suffix(".json").read_text())
    learning = {stage["stage"]: stage["learning"] for stage in data["stages"]}
    assert learning["code"] == {"steps": 2, "idle_steps": 0, "idle_windows": []}
    assert learning["ifrl"]["idle_steps"] == 4 and "note" in learning["ifrl"]
    print_summary(data, Console(width=200))
    assert "learned nothing: ifrl learned nothing: in all 4 logged steps" in capsys.readouterr().out
