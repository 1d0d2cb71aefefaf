"""``cascade tts`` from the command line against a served model: a run killed with SIGKILL
resumes without asking the server again for a generation it already made; bad problem files
stop the command before anything is spent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tts_helpers import UNSURE, ScriptedServer, respond, solution, subtask_of, write_problem

ROOT = Path(__file__).resolve().parents[2]
SAMPLES_ONLY = "n, m = map(int, input().split())\nprint(6 if n == 1 else 7)"


def cascade(*words, **options):
    env = {**os.environ, "COLUMNS": "200"}
    return [sys.executable, "-m", "cascade_rl.cli", *map(str, words)], {"cwd": ROOT, "env": env, **options}


def valid_rows(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass  # the line a kill tore
    return rows


def rectangle_script(prompt, number):
    if subtask_of(prompt) == "1":
        return respond(solution("max-rectangle", "one_row")), UNSURE
    accepted = "### Accepted Code:" in prompt
    return respond(solution("max-rectangle", "bands") if accepted else SAMPLES_ONLY), UNSURE


def test_kill_9_then_resume_spends_no_generation_twice(tmp_path):
    out = tmp_path / "run"
    log = out / "max-rectangle" / "generations.jsonl"
    with ScriptedServer(rectangle_script, delay=0.4) as server:
        argv, options = cascade(
            "tts", "run", "max-rectangle", "--generator", f"{server.base_url}#scripted", "--out", out,
            "--candidates", 4, "--concurrency", 2, "--workers", 2, "--max-tokens", 256,
        )  # fmt: skip
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **options)
        deadline = time.monotonic() + 240
        while len(valid_rows(log)) < 3 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        kept = valid_rows(log)
        asked_before = len(server.bodies)
        assert 3 <= len(kept) < 12, "the kill should land during round 1"
        resumed = subprocess.run(argv, capture_output=True, text=True, timeout=600, **options)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        asked_after = len(server.bodies) - asked_before
        assert server.max_in_flight <= 2  # --concurrency
    final = valid_rows(log)
    assert final[: len(kept)] == kept  # what was made survives unchanged
    assert asked_after == len(final) - len(kept)  # and is never asked for again
    summary = json.loads((out / "max-rectangle" / "summary.json").read_text())
    assert (summary["score"], summary["generations"]["used"], summary["submissions"]["used"]) == (100.0, 12, 3)
    assert "max-rectangle" in resumed.stdout and "100 / 100" in resumed.stdout  # the summary table
    assert (out / "trajectory.png").is_file() and (out / "max-rectangle" / "submissions.jsonl").is_file()


def test_bad_problem_files_stop_before_any_generation(tmp_path):
    broken = write_problem(tmp_path / "problems" / "broken", memory=512)
    untested = write_problem(tmp_path / "problems" / "untested", subtasks=[{"points": 10, "tests": ["tests/*.in"]}])
    with ScriptedServer(rectangle_script) as server:
        for path, field in ((broken, "field 'memory'"), (untested, "subtasks[0].tests[0]: pattern")):
            argv, options = cascade(
                "tts", "run", path, "--generator", f"{server.base_url}#scripted", "--out", tmp_path / "out"
            )
            result = subprocess.run(argv, capture_output=True, text=True, timeout=300, **options)
            assert result.returncode == 2
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and str(path) in lines[0] and field in lines[0]
        assert server.bodies == [] and not (tmp_path / "out").exists()  # nothing spent


def test_judge_command_prints_the_verdict_per_subtask(tmp_path):
    program = tmp_path / "one_row.py"
    program.write_text(solution("max-rectangle", "one_row"))
    argv, options = cascade("tts", "judge", "max-rectangle", program, "--json", tmp_path / "result.json")
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, **options)
    assert result.returncode == 0, result.stderr
    assert "max-rectangle: 40 / 100" in result.stdout and "Wrong Answer" in result.stdout
    saved = json.loads((tmp_path / "result.json").read_text())
    assert [s["verdict"] for s in saved["subtasks"]] == ["AC", "WA"]
