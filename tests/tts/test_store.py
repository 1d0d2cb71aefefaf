"""The run directory's logs: a torn last line is cut off, damage elsewhere is named; a changed
problem is refused on resume."""

from __future__ import annotations

import pytest

from cascade_rl.tts.store import RunDirError, check_run_file, read_jsonl


def test_a_torn_last_line_is_dropped_and_cut_off_the_file(tmp_path):
    log = tmp_path / "generations.jsonl"
    log.write_text('{"index": 0}\n{"index": 1}\n{"ind')
    assert read_jsonl(log) == [{"index": 0}, {"index": 1}]
    assert log.read_text() == '{"index": 0}\n{"index": 1}\n'  # appends stay valid JSONL


def test_damage_before_the_last_line_is_an_error_naming_the_line(tmp_path):
    log = tmp_path / "steps.jsonl"
    log.write_text('{"round": 1}\nnot json\n{"round": 2}\n')
    with pytest.raises(RunDirError, match=r"steps.jsonl:2: not a JSON object"):
        read_jsonl(log)


def test_resuming_with_a_changed_problem_is_refused(tmp_path):
    check_run_file(tmp_path, {"rounds": 50}, {"p": "digest-1"})
    check_run_file(tmp_path, {"rounds": 60}, {"p": "digest-1", "q": "digest-2"})  # more rounds, another problem
    with pytest.raises(RunDirError, match=r"run.json: problems.p: the problem changed"):
        check_run_file(tmp_path, {"rounds": 60}, {"p": "digest-3"})
