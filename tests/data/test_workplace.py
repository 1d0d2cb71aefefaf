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


def test_sft_rows_are_whole_episodes_that_find_what_they_write_before_writing_it(tmp_path):
    eval_dir, sft_dir = tmp_path / "bench", tmp_path / "sft"
    write_tasks(eval_dir, train=0, evaluation=20, seed=3)
    held = read(eval_dir / "workplace_eval.jsonl")
    env = {**os.environ, "COLUMNS": "200"}
    command = [sys.executable, "-m", "cascade_rl.cli", "data", "workplace", "-o", str(sft_dir), "--form", "sft"]
    result = subprocess.run(
        [*command, "--train", "100", "--eval", "0", "--exclude", str(eval_dir / "workplace_eval.jsonl")],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = read(sft_dir / "workplace_train.jsonl")
    assert len(rows) == 100 and read(sft_dir / "workplace_eval.jsonl") == []
    # the same draws as RL rows: each episode's writes are that task's reference calls
    write_tasks(tmp_path / "rl", train=100, evaluation=0, seed=0, exclude=held)
    references = [row["ground_truth"] for row in read(tmp_path / "rl" / "workplace_train.jsonl")]
    assert not {r["messages"][1]["content"].lower() for r in rows} & {request(r).lower() for r in held}
    from cascade_rl.data.shapes import normalise_sft

    looked_up = 0
    for row, reference in zip(rows, references, strict=True):
        assert len(json.loads(normalise_sft(row)["tools"])) == 27
        messages = row["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[-1]["content"] == "Done."
        seen = messages[1]["content"]  # what the model has read so far: the request, then each result
        writes = []
        for turn, result in zip(messages[2:-1:2], messages[3:-1:2]):
            function = turn["tool_calls"][0]["function"]
            arguments = json.loads(function["arguments"])
            assert result["role"] == "tool" and "Error" not in result["content"]
            for key in ("email_id", "event_id", "task_id", "customer_id", "recipient", "participant_email"):
                if key in arguments:  # an id or address is never guessed: an earlier result showed it
                    assert str(arguments[key]) in seen, (row["messages"][1]["content"], function)
            if key_is_write(function["name"]):
                writes.append({"name": function["name"], "arguments": function["arguments"]})
            looked_up += not key_is_write(function["name"])
            seen += result["content"]
        assert writes == reference and score(ground_truth=reference, calls=writes).reward == 1.0
    assert looked_up >= len(rows)  # nearly every task needs a look-up first


def key_is_write(name):
    return not any(word in name for word in ("search", "find", "get_"))
