"""``cascade`` with accelerate's FSDP allowed on CPU processes, for tests/train/test_fsdp.py.

accelerate 1.15 makes a run FSDP only when its processes sit on an accelerator; CPU processes
(DistributedType.MULTI_CPU) silently get DistributedDataParallel instead. This entry point lifts
exactly that check: when ``accelerate launch`` passed an FSDP config (ACCELERATE_USE_FSDP) and
the processes are on CPU, the accelerator state becomes FSDP with the plugin accelerate built
from that config. Everything else is the real code: accelerate's FSDP2 preparation (fully_shard
over a gloo mesh), the TRL trainers, distributed checkpoints, the cascade.

    accelerate launch --config_file configs/accelerate/fsdp2_cpu_test.yaml tests/fsdp_on_cpu.py run RECIPE
"""

import os

import accelerate.state
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

_accelerator_state_init = accelerate.state.AcceleratorState.__init__


def _fsdp_on_cpu(self, *args, **kwargs):
    _accelerator_state_init(self, *args, **kwargs)
    wanted = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if wanted and self.distributed_type == DistributedType.MULTI_CPU:
        plugin = kwargs.get("fsdp_plugin") or FullyShardedDataParallelPlugin()  # from the launch's FSDP_* settings
        if self._mixed_precision != "no":
            plugin.set_mixed_precision(self._mixed_precision)
        self.distributed_type, self.fsdp_plugin = DistributedType.FSDP, plugin


accelerate.state.AcceleratorState.__init__ = _fsdp_on_cpu

if __name__ == "__main__":
    from cascade_rl.cli import main

    main()
