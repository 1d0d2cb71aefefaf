"""Generation backends (DESIGN: ``llm/``): one interface, :class:`Generator`, with a local
``transformers`` backend and an OpenAI-compatible server backend, plus a YES/NO LLM judge
(SPEC appendix C.2). See :mod:`cascade_rl.llm.base` for the contract and
:mod:`cascade_rl.llm.factory` for building a backend from a spec. Every served model is named
and reached the same way (:mod:`cascade_rl.llm.transport`: the ``http://HOST:PORT/v1#MODEL``
spec and the HTTP client with its limit, retries and blocking bridge); the clients of served
models that are not generators are built on it: the reward-model service
(:mod:`cascade_rl.llm.pooling`), with the fail-fast guard every client shares
(:mod:`cascade_rl.llm.guard`)."""

from cascade_rl.llm.base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    GenerationError,
    Generator,
    Sampling,
    agenerate_many,
    apply_modes,
    generate_many,
)
from cascade_rl.llm.factory import load_generator
from cascade_rl.llm.judge import YesNoJudge
from cascade_rl.llm.local import LocalGenerator
from cascade_rl.llm.openai_compat import OpenAICompatGenerator, join_reasoning

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TEMPERATURE",
    "DEFAULT_TOP_P",
    "GenerationError",
    "Generator",
    "LocalGenerator",
    "OpenAICompatGenerator",
    "Sampling",
    "YesNoJudge",
    "agenerate_many",
    "apply_modes",
    "generate_many",
    "join_reasoning",
    "load_generator",
]
