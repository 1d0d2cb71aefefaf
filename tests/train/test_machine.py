"""machine.json's record of the sandbox (train/machine.py, issue 40): what untrusted code runs in
is settled and said at start-up, applied on every process, and repeated in the run's report."""

import json

import pytest
from rich.console import Console

from cascade_rl import sandbox
from cascade_rl.eval.report import build_report, print_summary
from cascade_rl.recipe import Runtime
from cascade_rl.sandbox import core
from cascade_rl.train import machine


@pytest.fixture
def no_bubblewrap(monkeypatch):
    """A machine where bubblewrap cannot run (the opt-in reset before and after)."""
    monkeypatch.setattr(core, "_bwrap_problem", lambda: "bubblewrap (bwrap) is not installed")
    monkeypatch.setattr(core, "_rlimits_allowed_by", None)
    monkeypatch.delenv("CASCADE_SANDBOX", raising=False)
    sandbox.isolation.cache_clear()
    yield
    monkeypatch.setattr(core, "_rlimits_allowed_by", None)
    monkeypatch.undo()
    sandbox.isolation.cache_clear()


def test_the_recipe_opts_into_rlimits_only_and_the_start_up_line_says_so(no_bubblewrap):
    assert sandbox.isolation_report()["isolation"] == "unavailable"
    refused = machine.sandbox_note(sandbox.isolation_report())
    assert "refused" in refused and "not installed" in refused
    machine.use_sandbox(Runtime())  # the default: bubblewrap or nothing
    assert sandbox.isolation_report()["isolation"] == "unavailable"
    with pytest.warns(RuntimeWarning, match="NO filesystem"):
        machine.use_sandbox(Runtime(sandbox="rlimits"))
        record = sandbox.isolation_report()
    assert record == {
        "isolation": "rlimits",
        "reason": "bubblewrap (bwrap) is not installed",
        "opted_in": "runtime.sandbox: rlimits",
    }
    assert "rlimits only, NO isolation (runtime.sandbox: rlimits" in machine.sandbox_note(record)
    assert machine.sandbox_note({"isolation": "bwrap"}) == ""


def test_a_bad_sandbox_setting_names_the_field():
    with pytest.raises(ValueError, match="sandbox"):
        Runtime(sandbox="docker")


def test_the_report_repeats_that_untrusted_code_ran_without_isolation(tmp_path):
    stage = tmp_path / "01-code"
    stage.mkdir()
    (stage / "stage.json").write_text(json.dumps({"index": 1, "name": "code", "kind": "grpo", "status": "done"}))
    (stage / "eval.json").write_text(json.dumps({"toy-code": 40.0}))
    record = {
        "isolation": "rlimits",
        "reason": "bubblewrap (bwrap) is not installed",
        "opted_in": "runtime.sandbox: rlimits",
    }
    (tmp_path / "machine.json").write_text(json.dumps({"choices": {}, "sandbox": record}))
    markdown = build_report(tmp_path).read_text()
    assert "ran with rlimits only, NO filesystem, network or process isolation" in markdown
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["sandbox"] == record
    console = Console(record=True, width=240)
    print_summary(report, console=console)
    text = console.export_text()
    assert "sandbox: Untrusted code" in text and "runtime.sandbox: rlimits" in text
    (tmp_path / "machine.json").write_text(json.dumps({"choices": {}, "sandbox": {"isolation": "bwrap"}}))
    assert "isolation:" not in build_report(tmp_path).read_text()
