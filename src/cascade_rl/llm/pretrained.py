"""Loading ``transformers`` models safely from any thread (DESIGN.md, "Layers": llm).

Scorer threads load what they need on first use: a reward model (``rewards/preference.py``), a
judge or a local generator (``llm/local.py``), a teacher. ``from_pretrained`` patches
process-wide state while it builds a model -- ``PreTrainedModel.tie_weights`` becomes a no-op
and ``torch.linspace`` is replaced, each restored when the load ends -- so two loads at once in
two threads can restore each other's patch and leave weight tying off for good: every later
model with tied embeddings then loads with its output head missing, on the meta device, and the
next trainer fails with "Cannot copy out of meta tensor" (seen when a GRPO stage followed RLHF,
whose two scorer threads had loaded the reward model at once). Every model load the project
makes goes through :func:`load_pretrained`, one at a time per process."""

from __future__ import annotations

import threading
from typing import Any

#: held while a model is built; re-entrant, for a load that loads another
LOADING = threading.RLock()


def load_pretrained(auto_class: Any, path: Any, **kwargs: Any) -> Any:
    """``auto_class.from_pretrained(path, **kwargs)``, never beside another load of this process."""
    with LOADING:
        return auto_class.from_pretrained(path, **kwargs)
