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
* :func:`decontaminate` (:mod:`.decontam`): 9-gram decontamination of training rows.

See docs/toy-world.md for the shapes that make a tiny model learn and the measured numbers.
"""

from cascade_rl.world.build import BENCHMARKS, WorldManifest, WorldOptions, WorldSizes, build_world
from cascade_rl.world.decontam import decontaminate
from cascade_rl.world.model import build_tiny_model, parameter_count
from cascade_rl.world.tokenizer import build_tokenizer

__all__ = [
    "BENCHMARKS",
    "WorldManifest",
    "WorldOptions",
    "WorldSizes",
    "build_world",
    "build_tiny_model",
    "build_tokenizer",
    "decontaminate",
    "parameter_count",
]
