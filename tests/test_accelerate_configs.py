"""The shipped `accelerate launch` configs (configs/accelerate/) parse with accelerate's own config
classes and turn into the intended runtime settings: ZeRO-3 or FSDP2 full sharding, bf16 on GPUs;
the two CPU test configs (tests/train/test_fsdp.py) the same sharding in fp32 over 2 processes.

The launch path is accelerate's real one (`launch_command`), with only the final process spawn
replaced by a capture of the environment it would hand to the training processes.
"""

from pathlib import Path

import accelerate.commands.launch as accelerate_launch
import pytest
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.utils import DeepSpeedPlugin, DistributedType, FullyShardedDataParallelPlugin
from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs" / "accelerate"
# file -> (distributed type, machines, processes over all machines, mixed precision)
EXPECTED = {
    "deepspeed_zero3.yaml": (DistributedType.DEEPSPEED, 1, 8, "bf16"),
    "deepspeed_zero3_multinode.yaml": (DistributedType.DEEPSPEED, 2, 16, "bf16"),
    "fsdp.yaml": (DistributedType.FSDP, 1, 8, "bf16"),
    "deepspeed_zero3_cpu_test.yaml": (DistributedType.DEEPSPEED, 1, 2, "no"),
    "fsdp2_cpu_test.yaml": (DistributedType.FSDP, 1, 2, "no"),
}


def launch_environment(path: Path, monkeypatch) -> tuple[object, dict[str, str]]:
    """Run accelerate's launch logic on ``path`` up to the process spawn; return (args, env)."""
    captured: dict[str, dict[str, str]] = {}
    monkeypatch.setattr(
        accelerate_launch, "deepspeed_launcher", lambda args: captured.update(env=prepare_deepspeed_cmd_env(args)[1])
    )
    monkeypatch.setattr(
        accelerate_launch, "multi_gpu_launcher", lambda args: captured.update(env=prepare_multi_gpu_env(args))
    )
    args = accelerate_launch.launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    accelerate_launch.launch_command(args)
    return args, captured["env"]


def test_every_shipped_config_is_covered():
    assert sorted(p.name for p in CONFIG_DIR.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_parses_with_accelerate_config_classes(name):
    distributed_type, machines, processes, precision = EXPECTED[name]
    config = load_config_from_file(str(CONFIG_DIR / name))
    assert isinstance(config, ClusterConfig)
    assert config.distributed_type == distributed_type
    assert config.mixed_precision == precision
    assert (config.num_machines, config.num_processes) == (machines, processes)
    assert config.use_cpu is False
    if distributed_type == DistributedType.DEEPSPEED:
        assert config.deepspeed_config["zero_stage"] == 3
        assert config.deepspeed_config["zero3_save_16bit_model"] is True
    else:
        assert config.fsdp_config["fsdp_version"] == 2
        assert config.fsdp_config["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    if machines > 1:
        assert config.main_process_ip and config.deepspeed_config["deepspeed_multinode_launcher"] == "standard"


@pytest.mark.parametrize(
    "name", ["deepspeed_zero3.yaml", "deepspeed_zero3_multinode.yaml", "deepspeed_zero3_cpu_test.yaml"]
)
def test_deepspeed_configs_launch_as_zero3(name, monkeypatch):
    _, machines, processes, precision = EXPECTED[name]
    args, env = launch_environment(CONFIG_DIR / name, monkeypatch)
    assert env["ACCELERATE_USE_DEEPSPEED"] == "true"
    assert env["ACCELERATE_MIXED_PRECISION"] == precision
    assert env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == "3"
    assert env["ACCELERATE_DEEPSPEED_ZERO3_INIT"] == "true"
    assert (int(args.num_machines), int(args.nproc_per_node)) == (machines, processes // machines)
    for key, value in env.items():
        if key.startswith("ACCELERATE_"):
            monkeypatch.setenv(key, value)
    plugin = DeepSpeedPlugin()  # what Accelerator builds inside each training process
    assert plugin.deepspeed_config["zero_optimization"]["stage"] == 3
    assert plugin.deepspeed_config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True


@pytest.mark.parametrize("name", ["fsdp.yaml", "fsdp2_cpu_test.yaml"])
def test_fsdp_configs_launch_as_fsdp2_full_shard_with_sharded_checkpoints(name, monkeypatch):
    _, _, processes, precision = EXPECTED[name]
    args, env = launch_environment(CONFIG_DIR / name, monkeypatch)
    assert env["ACCELERATE_USE_FSDP"] == "true"
    assert env["ACCELERATE_MIXED_PRECISION"] == precision
    assert env["FSDP_VERSION"] == "2"
    assert env["FSDP_RESHARD_AFTER_FORWARD"] == "true"  # FSDP2's full shard
    assert env["FSDP_AUTO_WRAP_POLICY"] == "TRANSFORMER_BASED_WRAP"
    assert int(args.nproc_per_node) == processes
    for key, value in env.items():
        if key.startswith(("ACCELERATE_", "FSDP_")):
            monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    assert plugin.auto_wrap_policy.__name__ == "transformer_auto_wrap_policy"
    # trainer checkpoints one shard per process; save_checkpoint gathers each stage's final model
    assert plugin.state_dict_type.name == "SHARDED_STATE_DICT"
