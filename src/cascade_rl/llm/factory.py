"""Building a generator from a spec (DESIGN.md, ``llm/``): the one place that knows every
backend, apart from the :class:`~cascade_rl.llm.base.Generator` interface the backends implement
(so the interface does not import its own implementations).

Spec forms (:data:`SPEC_FORMS`): a local model directory (``"local:PATH"`` or just ``PATH``), an
OpenAI-compatible server (``"http://host:8000/v1#MODEL"``, optionally ``"openai:"``-prefixed;
parsed by :func:`~cascade_rl.llm.transport.parse_server_spec`), or a dict whose other keys go
to the backend's constructor. A caller that knows settings for either kind of backend -- a
command's ``--concurrency`` for a server, its batch size for a local model -- passes them as
``server`` / ``local`` options; a dict spec's own keys win over them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_rl.llm.base import Generator
from cascade_rl.llm.local import LocalGenerator
from cascade_rl.llm.openai_compat import OpenAICompatGenerator
from cascade_rl.llm.transport import is_server_spec, parse_server_spec

SPEC_FORMS = (
    '"local:/path/to/model"',
    "an existing model directory",
    '"openai:http://host:8000/v1#MODEL"',
    '"http://host:8000/v1#MODEL"',
    '{"base_url": ..., "model": ..., **options}',
    '{"model_path": ..., **options}',
)


def load_generator(
    spec: str | Mapping[str, Any],
    *,
    server: Mapping[str, Any] | None = None,
    local: Mapping[str, Any] | None = None,
) -> Generator:
    """Build a backend from a spec (one of :data:`SPEC_FORMS`). ``server`` options go to an
    :class:`OpenAICompatGenerator` (``max_concurrency``, ``timeout``, ...), ``local`` options to a
    :class:`LocalGenerator` (``batch_size``, ``device``, ``dtype``, ...)."""
    server, local = dict(server or {}), dict(local or {})
    if isinstance(spec, Mapping):
        return _from_dict(spec, server, local)
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"generator spec must be a string or a dict, got {spec!r}")
    spec = spec.strip()
    if spec.startswith("local:"):
        return LocalGenerator(spec.removeprefix("local:"), **local)
    if is_server_spec(spec):
        served = parse_server_spec(spec, require_model=True)
        return OpenAICompatGenerator(served.url, served.model, **server)  # type: ignore[arg-type]
    if Path(spec).expanduser().is_dir():
        return LocalGenerator(spec, **local)
    raise ValueError(f"cannot read generator spec {spec!r}; expected one of: {', '.join(SPEC_FORMS)}")


def _from_dict(spec: Mapping[str, Any], server: dict[str, Any], local: dict[str, Any]) -> Generator:
    options = dict(spec)
    if "base_url" in options:
        if not options.get("model"):
            raise ValueError(f"an OpenAI-compatible spec needs a 'model' name: {dict(spec)}")
        return OpenAICompatGenerator(options.pop("base_url"), options.pop("model"), **{**server, **options})
    path = options.pop("model_path", None) or options.pop("local", None)
    if path:
        return LocalGenerator(path, **{**local, **options})
    raise ValueError(f"generator spec dict needs 'base_url' + 'model' or 'model_path', got keys {sorted(spec)}")
