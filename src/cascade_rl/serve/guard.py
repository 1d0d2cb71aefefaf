"""Deprecated alias of :mod:`cascade_rl.llm.guard` (issue 20).

The fail-fast guard and ``wait_for_url`` are client machinery (the judge, the reward-model
client and the teacher client use them), so they live with the model clients in ``llm/``,
below the rewards that call servers and below the servers (DESIGN.md, "Layers").

Importing this module warns and returns the new module itself (same object: attributes, patches
and ``isinstance`` agree). Remove in the next release.
"""

import sys
import warnings

from cascade_rl.llm import guard

warnings.warn(
    "cascade_rl.serve.guard moved to cascade_rl.llm.guard; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = guard
