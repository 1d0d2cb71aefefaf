"""`cascade data workplace`: tasks drawn from the databases, each solved by its reference calls,
no training task repeating a held-out task's request or answer."""

import json
import os
import subprocess
import sys

from cascade_rl.data.loading import rl_normaliser
from cascade_rl.data.workplace import FAMILIES, HeldOut, TaskReport, draw_tasks, task_row, write_tasks
from cascade_rl.rewards.workplace.scorer import score


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def request(row):
    messages = row.get("prompt") or row["responses_create_params"]["input"]
    return messages[-1]["content"]


def test_tasks_are_solved_by_their_reference_and_held_apart(tmp_path):
    report = write_tasks(tmp_path, train=40, evaluation=20, seed=3)
    train, held = read(tmp_path / "workplace_train.jsonl"), read(tmp_path / "workplace_eval.jsonl")
    assert report.written == {"workplace_eval.jsonl": 20, "workplace_train.jsonl": 40}
    for row in train + held:
        normalised = rl_normaliser(None)(row)  # loads as an RL row, tools shown in the system turn
        assert normalised["domain"] == "workplace" and "<tools>" in normalised["prompt"][0]["content"]
        assert score(ground_truth=row["ground_truth"], calls=row["ground_truth"]).reward == 1.0
        assert score(ground_truth=row["ground_truth"], calls=[]).reward == 0.0  # there is something to do
    assert not {request(r).lower() for r in train} & {request(r).lower() for r in held}
    answers = {json.dumps(r["ground_truth"], sort_keys=True) for r in held}
    assert not any(json.dumps(r["ground_truth"], sort_keys=True) in answers for r in train)
    assert len({r["category"] for r in train + held}) >= 4
    write_tasks(tmp_path / "again", train=40, evaluation=20, seed=3)
    assert (tmp_path / "again" / "workplace_train.jsonl").read_bytes() == (
        tmp_path / "workplace_train.jsonl"
    ).read_bytes()


def test_excluded_rows_are_never_drawn():
    import random

    first = draw_tasks(30, random.Random(1), HeldOut(), TaskReport())
    rows = [task_row(task, str(i), "nemo-gym") for i, task in enumerate(first)]
    held, report = HeldOut(), TaskReport()
    from cascade_rl.data.workplace import held_out_rows

    held_out_rows(rows + [{"prompt": "not messages"}], held, report)
    again = draw_tasks(30, random.Random(1), held, report)
    assert not {t.request for t in again} & {t.request for t in first}
    assert report.rejected["excluded row unreadable"] == 1 and report.rejected["same request as a held-out task"] > 0
    assert set(FAMILIES) >= {"email_reply", "calendar_create", "task_move", "crm_batch", "analytics_plot"}


def test_the_command_writes_nemo_gym_rows_and_holds_out_exclude_files(tmp_path):
    first = tmp_path / "first"
    env = {**os.environ, "COLUMNS": "200"}
    command = [sys.executable, "-m", "cascade_rl.cli", "data", "workplace", "--train", "10", "--eval", "5"]
    result = subprocess.run([*command, "-o", str(first), "--form", "nemo-gym"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    rows = read(first / "workplace_eval.jsonl")
    assert len(rows[0]["responses_create_params"]["tools"]) == 27 and isinstance(
        rows[0]["ground_truth"][0]["arguments"], str
    )
    second = tmp_path / "second"
    result = subprocess.run(
        [*command, "-o", str(second), "--exclude", str(first / "workplace_eval.jsonl")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    drawn = {request(r) for name in ("train", "eval") for r in read(second / f"workplace_{name}.jsonl")}
    assert not drawn & {request(r) for r in rows}
    assert "workplace_train.jsonl" in result.stdout
