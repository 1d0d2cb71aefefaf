"""What a distill stage recovered (docs/mopd.md): values after each teacher's own stage, after the
student's starting stage and after distillation, with standard errors and verdicts, in report.md,
report.json and the printed summary; computed from hand-written run files with known numbers."""

import json

from rich.console import Console

from cascade_rl.eval.recovery import Measured, Recovery, RecoveryRow, run_recovery, summary_sentence
from cascade_rl.eval.report import build_report, print_summary


def value(v, se):
    return {"value": v, "k": 4, "metric": "avg@4", "extra": {"stderr": se}}


# stage dir -> (kind, eval.json). Hand-chosen: math fell 47 -> 40 after its own stage and MOPD
# brings it to 46 (recovered: within one s.e. of 47); arena fell 80 -> 70, MOPD 73 (partly);
# ifeval 40 -> 42 (nothing lost); code 78 -> 70, MOPD 69 (not recovered).
STAGES = {
    "01-rlhf": ("grpo", {"toy-arena": value(80, 2), "toy-math": value(30, 3)}),
    "02-ifrl": ("grpo", {"toy-ifeval": value(40, 3)}),
    "03-math": ("grpo", {"toy-math": value(47, 3)}),
    "04-code": ("grpo", {"toy-code": value(78, 4)}),
    "05-swe": (
        "grpo",
        {"toy-arena": value(70, 2), "toy-ifeval": value(42, 3), "toy-math": value(40, 3), "toy-code": value(70, 4)},
    ),
    "06-mopd": (
        "distill",
        {"toy-arena": value(73, 2), "toy-ifeval": value(41, 3), "toy-math": value(46, 3), "toy-code": value(69, 4)},
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
    assert (math.teacher.value, math.start.value, math.after.value) == (47, 40, 46)
    assert (math.teacher.stage, math.start.stage, math.after.stage) == ("math", "swe", "mopd")
    assert (math.lost, math.regained, math.verdict) == (7, 6, "recovered")
    assert rows["toy-arena"].verdict == "partly recovered"  # 73 < 80 - sqrt(2^2 + 2^2)
    assert rows["toy-ifeval"].verdict == "nothing lost"
    assert rows["toy-code"].verdict == "not recovered"
    assert recovery.cost["steps"] == 2 and recovery.cost["teacher_s"] == 1.0 and recovery.cost["train_s"] == 50.0


def test_recovery_is_written_to_the_report_and_printed(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    report = build_report(run)
    text = report.read_text()
    assert "## What distillation recovered (mopd)" in text
    assert "| toy-math | math <- math | 47.0 ± 3.0 | 40.0 ± 3.0 (swe) | 46.0 ± 3.0 | +7.0 | +6.0 | recovered |" in text
    assert "recovered 1 (toy-math), partly 1 (toy-arena)" in text
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
    console = Console(record=True, width=200)
    print_summary(data, console)
    printed = console.export_text()
    assert "What distillation recovered (mopd)" in printed and "46.0 ± 3.0" in printed


def test_a_loss_within_the_noise_is_said_to_be_inconclusive():
    row = RecoveryRow("b", "d", Measured("t", 50, 4), Measured("s", 48, 4), Measured("m", 49, 4))
    assert row.lost == 2 and row.verdict == "recovered"  # 49 >= 50 - 5.7
    sentence = summary_sentence(Recovery("mopd", [row], {"steps": 1}))
    assert "not conclusive: the loss on b" in sentence
