"""Deprecated alias of :mod:`cascade_rl.rewards.swe_edits` (issue 20).

The SEARCH/REPLACE engine is the answer format the SWE reward reads and the pipeline's repair
step writes; it lives beside the reward, below this package, so both import it without a loop
(DESIGN.md, "Layers").

Importing this module warns and returns the new module itself (same object: attributes, patches
and ``isinstance`` agree). Remove in the next release.
"""

import sys
import warnings

from cascade_rl.rewards import swe_edits

warnings.warn(
    "cascade_rl.swe.edits moved to cascade_rl.rewards.swe_edits; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = swe_edits
