"""What stages share (train/common.py): experiment-tracker settings are data (issue 43) -- building a
trainer's arguments changes nothing in the process; W&B's environment lives only while it trains."""

import os

from cascade_rl.recipe import Runtime
from cascade_rl.train.common import Trackers, base_args


def test_tracker_settings_are_data_and_leave_the_environment_alone(tmp_path, monkeypatch):
    for name in ("TENSORBOARD_LOGGING_DIR", "WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT", "TRACKIO_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    runtime = Runtime(report_to=["tensorboard", "wandb", "trackio"])
    before = dict(os.environ)
    args = base_args(runtime, tmp_path / "run" / "03-math" / "substage-1" / "trainer", 0, run_name="math/substage-1")
    assert dict(os.environ) == before
    assert args["report_to"] == ["wandb", "trackio"] and args["project"] == "run"
    trackers = Trackers.of(runtime, tmp_path / "run" / "03-math" / "substage-1" / "trainer", "math/substage-1")
    [callback] = trackers.callbacks()
    assert callback.logging_dir == str(tmp_path / "run" / "tensorboard" / "math" / "substage-1")
    monkeypatch.setenv("WANDB_MODE", "online")  # the user's setting wins
    with trackers.environment():
        assert os.environ["WANDB_MODE"] == "online" and os.environ["WANDB_PROJECT"] == "run"
    assert "WANDB_PROJECT" not in os.environ and os.environ["WANDB_MODE"] == "online"


def test_without_trackers_nothing_is_reported_and_outside_a_run_the_trackers_keep_their_defaults(tmp_path):
    assert Trackers.of(Runtime(), tmp_path / "01-sft" / "trainer", None) == Trackers()
    outside = Trackers.of(Runtime(report_to=["tensorboard"]), tmp_path / "trainer", None)
    assert outside.report_to == ["tensorboard"] and outside.callbacks() == []
