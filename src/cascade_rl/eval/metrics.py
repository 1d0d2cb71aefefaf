"""Deprecated alias of :mod:`cascade_rl.metrics` (issue 20).

The sampling metrics are pure math that the SWE pipeline's ranking uses too, below ``eval/``;
they moved to the ground of the layer map (DESIGN.md, "Layers"). The names stay importable
from :mod:`cascade_rl.eval` itself (``from cascade_rl.eval import pass_at_k``) without a warning.

Importing this module warns and returns the new module itself (same object: attributes, patches
and ``isinstance`` agree). Remove in the next release.
"""

import sys
import warnings

from cascade_rl import metrics

warnings.warn(
    "cascade_rl.eval.metrics moved to cascade_rl.metrics; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = metrics
