"""What a distill stage recovered (docs/mopd.md): values after each teacher's own stage, after the
student's starting stage and after distillation, with standard errors and verdicts, in report.md,
report.json and the printed summary; computed from hand-written run files with known numbers."""

import json

import pytest
from rich.console import Console

from cascade_rl.eval.forgetting import Change, paired_stderr
from cascade_rl.eval.recovery import Measured, Recovery, RecoveryRow, run_recovery, summary_sentence
from cascade_rl.eval.report import build_report, print_summary


def value(v, se):
    return {"value": v, "k": 4, "metric": "avg@4", "extra": {"stderr": se}}


# stage dir -> (kind, eval.json). Hand-chosen (no samples: errors combined, e.g. sqrt(2^2 + 2^2) = 2.8):
#   math 60 -> 40 after its own stage (lost 20), 58 after MOPD: 2 below the teacher -> recovered;
#   arena 80 -> 60, 70 after MOPD: 10 below the teacher but +10 -> partly recovered;
#   code 78 -> 60, 61: +1 -> not recovered; ifeval 40 -> 42: nothing lost, then 30 (lowered by 12).
STAGES = {
    "01-rlhf": ("grpo", {"toy-arena": value(80, 2), "toy-math": value(30, 2)}),
    "02-ifrl": ("grpo", {"toy-ifeval": value(40, 1)}),
    "03-math": ("grpo", {"toy-math": value(60, 2)}),
    "04-code": ("grpo", {"toy-code": value(78, 2)}),
    "05-swe": (
        "grpo",
        {"toy-arena": value(60, 2), "toy-ifeval": value(42, 1), "toy-math": value(40, 2), "toy-code": value(60, 2)},
    ),
    "06-mopd": (
        "distill",
        {"toy-arena": value(70, 2), "toy-ifeval": value(30, 1), "toy-math": value(58, 2), "toy-code": value(61, 2)},
    ),
}
TARGETS = {"rlhf": "toy-arena", "ifrl": "toy-ifeval", "math": "toy-math", "code": "toy-code", "swe": "toy-swe"}


def write_run(run):
    (run / "recipe.json").parent.mkdir(parents=True, exist_ok=True)
    (run / "recipe.json").write_text(json.dumps({"eval": {"targets": TARGETS}}))
    for index, (name, (kind, evaluation)) in enumerate(STAGES.items(), start=1):
        folder = run / name
        folder.mkdir()
        status = {"index": index, "name": name[3:], "kind": kind, "status": "done", "wall_s": 60.0, "train_s": 50.0}
        status["eval_s"] = 10.0
        (folder / "stage.json").write_text(json.dumps(status))
        (folder / "eval.json").write_text(json.dumps(evaluation))
    teachers = {
        domain: {"domain": domain, "spec": stage, "source": str(run / folder / "model"), "stage_dir": str(run / folder)}
        for domain, stage, folder in [
            ("preference", "rlhf", "01-rlhf"),
            ("ifeval", "ifrl", "02-ifrl"),
            ("math", "math", "03-math"),
            ("code", "code", "04-code"),
        ]
    }
    teachers["extra"] = {"domain": "extra", "spec": "http://x/v1", "source": "http://x/v1", "stage_dir": None}
    record = {"student": str(run / "05-swe" / "model"), "student_stage_dir": str(run / "05-swe"), "teachers": teachers}
    (run / "06-mopd" / "distill.json").write_text(json.dumps(record))
    metrics = [
        {"step": s, "time/step": 2.0, "time/generation": 1.0, "time/teacher": 0.5, "distill/math/reverse_kl": 0.1 / s}
        for s in (1, 2)
    ]
    (run / "06-mopd" / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))


def test_recovery_per_teacher_benchmark_with_verdicts(tmp_path):
    write_run(tmp_path / "run")
    (recovery,) = run_recovery(tmp_path / "run")
    rows = {row.benchmark: row for row in recovery.rows}
    assert list(rows) == ["toy-arena", "toy-ifeval", "toy-math", "toy-code"]  # the server teacher has no stage
    math = rows["toy-math"]
    assert (math.teacher.value, math.start.value, math.after.value) == (60, 40, 58)
    assert (math.teacher.stage, math.start.stage, math.after.stage) == ("math", "swe", "mopd")
    assert (math.lost.delta, math.changed.delta, math.gap.delta) == (20, 18, -2)
    assert math.lost.stderr == pytest.approx(8**0.5)  # no samples: the two errors combined
    assert {name: row.verdict for name, row in rows.items()} == {
        "toy-arena": "partly recovered",
        "toy-ifeval": "nothing lost",
        "toy-math": "recovered",
        "toy-code": "not recovered",
    }
    assert recovery.cost["steps"] == 2 and recovery.cost["teacher_s"] == 1.0 and recovery.cost["train_s"] == 50.0
    sentence = summary_sentence(recovery)
    assert "toy-math recovered; toy-code not recovered" in sentence
    assert "Distillation significantly lowered: toy-ifeval." in sentence


def test_differences_are_paired_over_prompts_when_the_samples_exist(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    scores = {"03-math": [1, 1, 1, 0, 1], "05-swe": [1, 0, 0, 0, 1], "06-mopd": [1, 1, 0, 0, 1]}
    for stage, rewards in scores.items():
        folder = run / stage / "eval-samples"
        folder.mkdir()
        lines = [json.dumps({"prompt_index": i, "reward": r, "response": "x"}) for i, r in enumerate(rewards)]
        (folder / "toy-math.jsonl").write_text("\n".join(lines) + "\n")
    (recovery,) = run_recovery(run)
    math = next(row for row in recovery.rows if row.benchmark == "toy-math")
    assert math.lost.stderr == pytest.approx(paired_stderr(scores["05-swe"], scores["03-math"]))
    assert math.changed.stderr == pytest.approx(paired_stderr(scores["05-swe"], scores["06-mopd"]))
    assert math.lost.stderr != pytest.approx(8**0.5)


def test_recovery_is_written_to_the_report_and_printed(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    report = build_report(run)
    text = report.read_text()
    assert "## What distillation recovered (mopd)" in text
    row = "| toy-math | math <- math | 60.0 ± 2.0 | 40.0 ± 2.0 (swe) | 58.0 ± 2.0 | +20.0 ± 2.8 | +18.0 ± 2.8 "
    assert row in text
    assert "teacher scoring 25%" in text  # 1.0 s of 4.0 s of steps
    assert "![mopd: reverse KL and response length per domain](plots/06-mopd-domains.png)" in text
    assert (run / "plots" / "06-mopd-domains.png").read_bytes().startswith(b"\x89PNG")
    data = json.loads(report.with_suffix(".json").read_text())
    assert [row["verdict"] for row in data["recovery"][0]["rows"]] == [
        "partly recovered",
        "nothing lost",
        "recovered",
        "not recovered",
    ]
    assert [s["kind"] for s in data["stages"]][-1] == "distill"
    console = Console(record=True, width=250)
    print_summary(data, console)
    printed = console.export_text()
    assert "What distillation recovered (mopd)" in printed and "58.0 ± 2.0" in printed
    assert "toy-math recovered" in printed


def test_a_loss_within_twice_its_error_is_noise():
    row = RecoveryRow(
        "b",
        "d",
        Measured("t", 50, 2),
        Measured("s", 47, 2),
        Measured("m", 47, 2),
        Change(3, 2),
        Change(0, 2),
        Change(-3, 2),
    )
    assert row.verdict == "lost within noise"
    assert "Below it within noise: b." in summary_sentence(Recovery("mopd", [row], {"steps": 1}))
