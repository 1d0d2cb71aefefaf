"""Building a generator from a spec (DESIGN.md, ``llm/``): the one place that knows every
backend, apart from the :class:`~cascade_rl.llm.base.Generator` interface the backends implement
(so the interface does not import its own implementations).

Spec forms (:data:`SPEC_FORMS`): a local model directory (``"local:PATH"`` or just ``PATH``), an
OpenAI-compatible server (``"http://host:8000/v1#MODEL"``, optionally ``"openai:"``-prefixed),
or a dict whose other keys go to the backend's constructor.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_rl.llm.base import Generator
from cascade_rl.llm.local import LocalGenerator
from cascade_rl.llm.openai_compat import OpenAICompatGenerator

SPEC_FORMS = (
    '"local:/path/to/model"',
    "an existing model directory",
    '"openai:http://host:8000/v1#MODEL"',
    '"http://host:8000/v1#MODEL"',
    '{"base_url": ..., "model": ..., **options}',
    '{"model_path": ..., **options}',
)


def load_generator(spec: str | Mapping[str, Any]) -> Generator:
    """Build a backend from a spec (one of :data:`SPEC_FORMS`). Dict options are passed to the
    backend's constructor (e.g. ``max_concurrency``, ``timeout``, ``device``, ``default_mode``)."""
    if isinstance(spec, Mapping):
        options = dict(spec)
        if "base_url" in options:
            if not options.get("model"):
                raise ValueError(f"an OpenAI-compatible spec needs a 'model' name: {dict(spec)}")
            return OpenAICompatGenerator(options.pop("base_url"), options.pop("model"), **options)
        path = options.pop("model_path", None) or options.pop("local", None)
        if path:
            return LocalGenerator(path, **options)
        raise ValueError(f"generator spec dict needs 'base_url' + 'model' or 'model_path', got keys {sorted(spec)}")
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"generator spec must be a string or a dict, got {spec!r}")
    spec = spec.strip()
    if spec.startswith("local:"):
        return LocalGenerator(spec.removeprefix("local:"))
    url = spec.removeprefix("openai:")
    if url.startswith(("http://", "https://")):
        base_url, _, model = url.partition("#")
        if not model:
            raise ValueError(f"server spec {spec!r} names no model; write {base_url}#MODEL_NAME")
        return OpenAICompatGenerator(base_url, model)
    if Path(spec).is_dir():
        return LocalGenerator(spec)
    raise ValueError(f"cannot read generator spec {spec!r}; expected one of: {', '.join(SPEC_FORMS)}")
