"""Every ``auto`` settled once at start-up (issue 43): machine.json holds concrete choices, the
recipe the stages read carries them, and training and evaluation load the same dtype. And
machine.json's record of the sandbox (issue 40): what untrusted code runs in is settled and said at
start-up, applied on every process, and repeated in the run's report."""

import json

import pytest
from rich.console import Console

from cascade_rl import sandbox
from cascade_rl.eval.report import build_report, print_summary
from cascade_rl.recipe import Runtime, parse_recipe
from cascade_rl.sandbox import core
from cascade_rl.train import machine


def recipe(**model):
    return parse_recipe({"name": "r", "model": {"path": "m", **model}, "stages": [{"kind": "eval"}]})


@pytest.mark.parametrize("gpu", [False, True])
def test_no_choice_is_left_auto_or_unset_and_training_and_evaluation_agree(gpu, monkeypatch):
    monkeypatch.setattr("cascade_rl.hardware.has_gpu", lambda: gpu)
    monkeypatch.setattr("cascade_rl.hardware.describe", lambda: {"gpu": gpu})
    decided = machine.decide(recipe(), None)
    choices = decided["choices"]
    assert choices["dtype"] == choices["sample_dtype"] == ("bfloat16" if gpu else "float32")
    assert choices["bf16"] is gpu and choices["lm_head"] == ("fused" if gpu else "dense")
    settled = machine.apply(recipe(), decided)
    assert settled.model.dtype == settled.model.sampling_dtype == choices["dtype"]  # what training and eval load
    assert (settled.runtime.bf16, settled.runtime.lm_head, settled.runtime.use_vllm) == (
        gpu,
        choices["lm_head"],
        choices["use_vllm"],
    )


def test_sampling_auto_follows_the_probe_and_an_explicit_choice_stays(monkeypatch):
    monkeypatch.setattr("cascade_rl.hardware.has_gpu", lambda: False)
    monkeypatch.setattr("cascade_rl.hardware.bf16_is_fast", lambda: True)
    assert machine.sampling_dtype("auto", "float32") == "bfloat16"
    assert machine.sampling_dtype(None, "auto") == "float32"
    assert machine.sampling_dtype("float16", "float32") == "float16"
    assert machine.mixed_precision("auto") is True and machine.mixed_precision(None) is False
    with pytest.raises(ValueError, match="lm_head must be auto, fused or dense"):
        machine.lm_head("sparse")


def test_the_environment_switch_is_said_in_the_choice(monkeypatch):
    monkeypatch.setenv("CASCADE_VLLM", "off")
    assert machine.engine("auto", None).reason == "CASCADE_VLLM=off"


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
