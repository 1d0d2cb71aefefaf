"""Deprecated alias of :mod:`cascade_rl.train.reward_adapter` (issue 20).

The TRL reward adapter gathers rewards over training processes, so it lives with the trainer;
the reward package is pure scoring (DESIGN.md, "Layers"). Importing this module warns and
returns the new module itself (same object: attributes, patches and ``isinstance`` agree).
It is the one import from ``rewards`` up into ``train``, ignored by name in ``.importlinter``;
remove both in the next release.
"""

import sys
import warnings

from cascade_rl.train import reward_adapter

warnings.warn(
    "cascade_rl.rewards.adapter moved to cascade_rl.train.reward_adapter; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = reward_adapter
