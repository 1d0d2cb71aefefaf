"""Every ``auto`` settled once at start-up (issue 43): machine.json holds concrete choices, the
recipe the stages read carries them, and training and evaluation load the same dtype."""

import pytest

from cascade_rl.recipe import parse_recipe
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
