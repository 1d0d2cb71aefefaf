"""Deprecated alias of :mod:`cascade_rl.llm.pooling` (issue 20).

The reward-model service protocol (vLLM's Pooling API: request and response shapes, the client,
its preflight) is used by the RLHF reward (the client) and by ``cascade serve`` (the server); it
lives with the model clients in ``llm/``, below both (DESIGN.md, "Layers").

Importing this module warns and returns the new module itself (same object: attributes, patches
and ``isinstance`` agree). Remove in the next release.
"""

import sys
import warnings

from cascade_rl.llm import pooling

warnings.warn(
    "cascade_rl.serve.protocol moved to cascade_rl.llm.pooling; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = pooling
