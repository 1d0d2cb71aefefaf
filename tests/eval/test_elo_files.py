"""``cascade elo``: contest and samples files, the shipped example computed by hand, and bad
input named in one line."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cascade_rl.eval.elo import ContestFileError, codeforces_elo, load_contests, load_samples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "elo"

# Round 1 (regular, four humans rated 1600 on 2000/1500/1000/500 points): R1A 8/8 -> 500,
# R1B 2/8 -> 1000 - 50 * 6/3 = 900; 1400 points -> place m = 3.
#   appendix E: 3 = 4 / (1 + 10^x) -> 10^x = 1/3;  Codeforces seed: 2 = 4 / (1 + 10^x) -> 10^x = 1
# Educational 2 (ICPC, four humans rated 2000): E2C 1/4 (penalty 3/2 -> 15 min), E2D 4/4, E2E 0/4;
# 2 solved in 15 min: below (3, 100), above (2, 50), (2, 80), (1, 10) -> m = 2.
#   appendix E: 2 = 4 / (1 + 10^x) -> 10^x = 1;    Codeforces seed: 1 = 4 / (1 + 10^x) -> 10^x = 3
ROUND_1 = 1600 - 400 * math.log10(3)
EDUCATIONAL_2 = 2000.0
CODEFORCES = (1600.0, 2000 + 400 * math.log10(3))


def test_the_example_contests_give_the_hand_computed_ratings():
    contests = load_contests(EXAMPLE / "contests.yaml")
    results = load_samples(EXAMPLE / "samples.jsonl", contests)
    assert [r.correct for r in results] == [(8, 2), (1, 4, 0)]
    assert [r.attempts for r in results] == [(8, 8), (4, 4, 4)]
    estimate = codeforces_elo(results)
    assert [c.rank for c in estimate.contests] == [3.0, 2.0]
    assert [c.standing.points for c in estimate.contests][0] == pytest.approx(1400.0)
    assert estimate.contests[1].standing.penalty_minutes == pytest.approx(15.0)
    assert list(estimate.per_contest.values()) == pytest.approx([ROUND_1, EDUCATIONAL_2], abs=1e-3)
    assert estimate.elo == pytest.approx((ROUND_1 + EDUCATIONAL_2) / 2, abs=1e-3)
    codeforces = codeforces_elo(results, rank_equation="codeforces")
    assert codeforces.elo == pytest.approx(sum(CODEFORCES) / 2, abs=1e-3)


def run_elo(*words):
    env = {**os.environ, "COLUMNS": "200"}
    argv = [sys.executable, "-m", "cascade_rl.cli", "elo", *map(str, words)]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_cascade_elo_prints_each_contest_and_the_mean(tmp_path):
    result = run_elo(EXAMPLE / "contests.yaml", EXAMPLE / "samples.jsonl", "--json", tmp_path / "elo.json")
    assert result.returncode == 0, result.stderr
    assert f"{ROUND_1:.1f}" in result.stdout and f"{(ROUND_1 + EDUCATIONAL_2) / 2:.1f}" in result.stdout
    record = json.loads((tmp_path / "elo.json").read_text())
    assert record["rank_equation"] == "as_written" and record["min_points_fraction"] == 0.0
    assert [c["rank"] for c in record["contests"]] == [3.0, 2.0]
    option = run_elo(EXAMPLE / "contests.yaml", EXAMPLE / "samples.jsonl", "--rank-equation", "codeforces")
    assert option.returncode == 0 and f"{sum(CODEFORCES) / 2:.1f}" in option.stdout


def copy_example(tmp_path, contests_text=None, samples_text=None):
    for name in ("contests.yaml", "educational-2.csv", "samples.jsonl"):
        (tmp_path / name).write_text((EXAMPLE / name).read_text())
    if contests_text is not None:
        (tmp_path / "contests.yaml").write_text(contests_text)
    if samples_text is not None:
        (tmp_path / "samples.jsonl").write_text(samples_text)
    return tmp_path / "contests.yaml", tmp_path / "samples.jsonl"


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            ("samples", lambda t: t + '{"problem": "R1Z", "correct": true}\n'),
            "samples.jsonl:29: problem: unknown problem id 'R1Z'",
        ),
        (("samples", lambda t: t + '{"correct": true}\n'), "samples.jsonl:29: problem: missing"),
        (
            ("samples", lambda t: t + '{"problem": "R1A", "correct": "yes"}\n'),
            "samples.jsonl:29: correct: expected true/false",
        ),
        (
            ("samples", lambda t: t.replace('{"problem": "E2E", "correct": false}\n', "")),
            "problems[2]: no samples for problem 'E2E'",
        ),
        (
            ("contests", lambda t: t.replace("style: icpc", "style: icpc\n    rated: true")),
            "contests[1]: unknown field 'rated'",
        ),
        (
            ("contests", lambda t: t.replace("{id: R1B, points: 1000}", "{id: R1B}")),
            "contests[0].problems[1]: points: missing",
        ),
        (("contests", lambda t: t.replace("{id: E2C}", "{id: R1A}")), "problem id 'R1A' is in"),
        (("contests", lambda t: t.replace("style: regular ", "style: marathon")), "style: must be 'regular' or 'icpc'"),
        (("csv", lambda t: t.replace("frank,2000", "frank,")), "educational-2.csv:3: rating: missing"),
    ],
)
def test_bad_contest_or_samples_files_fail_with_one_line(tmp_path, edit, expected):
    which, change = edit
    contests, samples = copy_example(tmp_path)
    target = {"samples": samples, "contests": contests, "csv": tmp_path / "educational-2.csv"}[which]
    target.write_text(change(target.read_text()))
    with pytest.raises(ContestFileError) as caught:
        load_samples(samples, load_contests(contests), contests)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_cascade_elo_with_an_unknown_problem_id_exits_with_one_line(tmp_path):
    contests, samples = copy_example(tmp_path)
    samples.write_text(samples.read_text() + '{"problem": "R1Z", "correct": true}\n')
    result = run_elo(contests, samples)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert f"{samples}:29: problem: unknown problem id 'R1Z' (not in {contests})" in line
