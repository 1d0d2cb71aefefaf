"""The frozen context every stage runner is given (issue 43): settled once, read-only."""

import dataclasses

import pytest

from cascade_rl.recipe import Runtime
from cascade_rl.train.context import Handover, StageContext


def test_a_context_made_outside_a_cascade_is_settled_by_the_cascades_rules(tmp_path, monkeypatch):
    monkeypatch.setattr("cascade_rl.hardware.has_gpu", lambda: False)
    context = StageContext.settle(Runtime(), seed=3, stage_dir=tmp_path / "s", policy=tmp_path / "m")
    assert context.dtypes == ("float32", "float32")  # model.dtype auto on a CPU; sampling follows it
    assert context.runtime.bf16 is False and context.runtime.lm_head == "dense"
    assert context.runtime.use_vllm is False  # tests/conftest.py: CASCADE_VLLM=off
    bf16 = StageContext.settle(Runtime(), seed=3, stage_dir=tmp_path, policy=tmp_path, dtype="bfloat16")
    assert bf16.dtypes == ("bfloat16", "bfloat16")


def test_a_context_cannot_be_changed_and_hands_over_to_the_next_stage(tmp_path):
    context = StageContext.settle(Runtime(), seed=0, stage_dir=tmp_path / "01-a", policy=tmp_path / "base",
                                  reward_models={"rm": tmp_path / "rm"})  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.seed = 1
    with pytest.raises(TypeError):
        context.reward_models["other"] = tmp_path  # type: ignore[index]
    following = context.next_stage(tmp_path / "02-b", Handover(tmp_path / "01-a" / "model", {}))
    assert (following.policy, following.stage_dir, dict(following.reward_models)) == (
        tmp_path / "01-a" / "model",
        tmp_path / "02-b",
        {},
    )
