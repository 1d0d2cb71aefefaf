"""The embedded toy world (issue 4): a tiny model, its tokenizer and seeded task generators in
which the whole cascade visibly learns on a CPU in minutes.

* :func:`build_world` (:mod:`.build`) writes the SFT, reward-model, RL and benchmark files, the
  tokenizer and a manifest;
* :func:`build_tokenizer` (:mod:`.tokenizer`) and :func:`build_tiny_model` (:mod:`.model`) make
  the tokenizer and the Qwen3 model;
* generators: :mod:`.general` (chat, preference pairs), :mod:`.instructions` (IFEval
  constraints), :mod:`.arithmetic` (math), :mod:`.programs` (code), :mod:`.tools` (tool calls),
  :mod:`.swe` (repositories with a bug); :mod:`.near_miss` (SFT answers in a form the verifier
  does not reward, for the share ``WorldOptions.sft_near_miss``);
  :mod:`.judge` (judge-format rows of the preference pairs for a toy pairwise GenRM, opt-in:
  ``WorldSizes.sft_judge``);
* :func:`decontaminate` (:mod:`.decontam`): 9-gram decontamination of training rows.

See docs/toy-world.md for the shapes that make a tiny model learn and the measured numbers.
"""

from __future__ import annotations

import importlib
from typing import Any

#: the package's public names and the module of each, imported when first used: the task
#: generators (``world.instructions`` for ``cascade data constrain``) need neither torch nor
#: transformers, which the model and the tokenizer do (a light command starts in well under 1 s)
_EXPORTS = {
    "BENCHMARKS": "build",
    "WorldManifest": "build",
    "WorldOptions": "build",
    "WorldSizes": "build",
    "build_world": "build",
    "decontaminate": "decontam",
    "build_tiny_model": "model",
    "parameter_count": "model",
    "build_tokenizer": "tokenizer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
