"""Sampling k responses per benchmark prompt through any generation backend (SPEC section 9:
the paper samples at temperature 0.6, top-p 0.95, up to 64K tokens, and reports avg@k).

* **Backends.** :func:`open_generator` turns what the user named into a
  :class:`~cascade_rl.llm.Generator`: a local checkpoint directory (``transformers``
  ``generate``, batched) or an OpenAI-compatible server, ``http://host:port/v1#MODEL`` (vLLM,
  SGLang, ``transformers serve``), with at most ``max_concurrency`` requests in flight, a
  per-request timeout and retries (:mod:`cascade_rl.llm.openai_compat`). Any object with the
  ``Generator`` interface is used as it is.
* **Budget.** A local model cannot write past its context: the token budget is cut to the
  room the longest prompt leaves (``max_position_embeddings``). A server enforces its own
  context length (vLLM rejects a request that does not fit: start it with a large enough
  ``--max-model-len``).
* **Progress and resumption.** A progress bar counts prompts as they finish (the vLLM engine
  reports each from inside a call of hundreds: :meth:`LocalGenerator.reporting`). Samples are
  appended to a progress file as soon as their call returns (:class:`SampleStore`), keyed by the
  model, the prompt and the sampling settings; a rerun into the same directory keeps every sample whose
  key still matches and generates only the rest, so an evaluation killed after hours resumes
  where it stopped. Delete the file to sample afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from cascade_rl.llm.base import GenerationError, Generator, Sampling, generate_many
from cascade_rl.llm.factory import load_generator
from cascade_rl.llm.local import LocalGenerator
from cascade_rl.llm.openai_compat import OpenAICompatGenerator
from cascade_rl.llm.transport import is_server_spec

Messages = Sequence[Mapping[str, Any]]
#: sequences handed to the vLLM engine per call, in batches of the evaluation's batch size
VLLM_CALL_FACTOR = 4


def open_generator(
    model: str | Path | Generator,
    *,
    batch_size: int = 32,
    max_concurrency: int = 64,
    timeout: float = 3600.0,
    dtype: str | None = None,
    engine: str = "transformers",
) -> Generator:
    """A generator for a checkpoint directory (weights in ``dtype``: None = float32 on a CPU, the
    checkpoint's own elsewhere; sampled by ``engine``, ``transformers`` or ``vllm``), a server spec
    ``http://host/v1#MODEL`` or an existing generator (returned unchanged)."""
    if not isinstance(model, (str, Path)):
        return model
    spec = str(model)
    if not is_server_spec(spec) and not Path(spec).expanduser().is_dir():
        raise FileNotFoundError(
            f"model {spec!r} is neither a checkpoint directory nor a server spec (http://host:port/v1#MODEL)"
        )
    return load_generator(
        spec if is_server_spec(spec) else str(Path(spec).expanduser()),
        server={"max_concurrency": max_concurrency, "timeout": timeout},
        local={"batch_size": batch_size, "dtype": None if dtype in (None, "auto") else dtype, "engine": engine},
    )


def describe(generator: Generator) -> str:
    """What produced the samples, for the progress-file keys: the server and model name, or
    the checkpoint directory and the time its files last changed (a retrained model at the same
    path does not reuse old samples)."""
    if isinstance(generator, OpenAICompatGenerator):
        return f"{generator.base_url}#{generator.model}"
    if isinstance(generator, LocalGenerator):
        path = Path(generator.model_path).resolve()
        changed = max((item.stat().st_mtime_ns for item in path.iterdir() if item.is_file()), default=0)
        dtype = generator.dtype_name
        engine = "" if generator.engine == "transformers" else f"+{generator.engine}"
        return f"{path}@{changed}" + ("" if dtype == "float32" else f"#{dtype}") + engine
    return f"{type(generator).__module__}.{type(generator).__qualname__}"


def token_budget(generator: Generator, prompts: Sequence[Messages], max_tokens: int) -> int:
    """``max_tokens``, cut for a local model to the room its longest prompt leaves."""
    if not isinstance(generator, LocalGenerator) or not prompts:
        return max_tokens
    limit = getattr(generator.config, "max_position_embeddings", None)
    if limit is None:
        return max_tokens
    return max(1, min(max_tokens, limit - generator.longest_prompt(prompts)))


def reserve(generator: Generator, prompts: Sequence[Messages], max_tokens: int) -> None:
    """Size a local generator's vLLM engine for all of ``prompts`` before sampling them
    (:meth:`~cascade_rl.llm.local.LocalGenerator.reserve`; the engine keeps within the model's
    positions); servers size themselves."""
    if isinstance(generator, LocalGenerator):
        generator.reserve(prompts, max_tokens)


class SampleStore:
    """Samples of one benchmark's prompts, appended to ``path`` as each prompt finishes
    (module docstring). ``keys[i]`` identifies prompt ``i`` with its model and settings."""

    def __init__(self, path: Path, keys: Sequence[str]) -> None:
        self.path, self.keys = Path(path), list(keys)
        self.done: dict[int, list[str]] = {}
        self._lock = threading.Lock()
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):  # a line cut by a kill: drop it, or the next record would join it
            text = text[: text.rfind("\n") + 1]
            self.path.write_text(text, encoding="utf-8")
        for line in text.splitlines():
            try:
                record = json.loads(line)
                index, key, samples = record["index"], record["key"], record["samples"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a line cut by a kill
            if isinstance(index, int) and 0 <= index < len(self.keys) and self.keys[index] == key:
                self.done[index] = list(samples)

    def add(self, index: int, samples: list[str]) -> None:
        record = {"index": index, "key": self.keys[index], "samples": samples}
        with self._lock:
            self.done[index] = samples
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def sample_keys(generator: Generator, prompts: Sequence[Messages], settings: Mapping[str, Any]) -> list[str]:
    """One key per prompt: the model, the prompt and the sampling settings, hashed."""
    model = describe(generator)
    fixed = json.dumps(settings, sort_keys=True)
    return [
        hashlib.sha256(json.dumps([model, fixed, list(p)], sort_keys=True, default=str).encode()).hexdigest()[:32]
        for p in prompts
    ]


def sample(
    generator: Generator,
    prompts: Sequence[Messages],
    sampling: Sampling,
    *,
    batch_size: int = 32,
    progress: Path | None = None,
    description: str = "sampling",
    seed: int | None = None,
) -> list[list[str]]:
    """``sampling.n`` responses for each prompt, in prompt order. With ``progress``, each prompt's
    samples are appended to that file as they finish and a rerun reuses those whose model, prompt
    and settings still match (:class:`SampleStore`). ``seed`` seeds torch before local sampling
    (servers sample with their own seeds)."""
    if seed is not None and isinstance(generator, LocalGenerator):
        import torch

        torch.manual_seed(seed)
    store = None
    if progress is not None:
        store = SampleStore(progress, sample_keys(generator, prompts, {"k": sampling.n} | sampling.settings()))
    results: dict[int, list[str]] = dict(store.done) if store else {}
    todo = [i for i in range(len(prompts)) if i not in results]

    def finished(index: int, samples: list[str], counted: bool = False) -> None:
        results[index] = samples
        if store is not None:
            store.add(index, samples)
        if not counted:
            bar.update(1)

    with tqdm(total=len(prompts), initial=len(prompts) - len(todo), desc=description, unit="prompt") as bar:
        if isinstance(generator, OpenAICompatGenerator):
            generator.run_sync(_concurrently(generator, prompts, todo, sampling, finished))
        else:
            # the vLLM engine keeps batch_size sequences running; it gets more at once to refill from
            sequences = batch_size * (VLLM_CALL_FACTOR if getattr(generator, "engine", None) == "vllm" else 1)
            chunk = max(1, sequences // sampling.n)
            with _engine_moves(bar, generator) as counted:
                for start in range(0, len(todo), chunk):
                    indices = todo[start : start + chunk]
                    outputs = generate_many(generator, [list(prompts[i]) for i in indices], sampling)
                    for index, samples in zip(indices, outputs):
                        finished(index, list(samples), counted)
    return [results[i] for i in range(len(prompts))]


def _engine_moves(bar: tqdm, generator: Generator) -> contextlib.AbstractContextManager[bool]:
    """A context in which ``generator`` moves ``bar`` itself as each prompt finishes, where it can
    (the vLLM engine samples hundreds of prompts in one call); it yields whether it does."""
    if isinstance(generator, LocalGenerator):
        return generator.reporting(lambda: bar.update(1))
    return contextlib.nullcontext(False)


async def _concurrently(
    generator: OpenAICompatGenerator,
    prompts: Sequence[Messages],
    todo: Sequence[int],
    sampling: Sampling,
    finished: Callable[[int, list[str]], None],
) -> None:
    """All prompts at once; the generator keeps at most ``max_concurrency`` requests in flight.
    A prompt whose requests fail (after the generator's retries) does not stop the others; the
    first failure is raised once all have ended, with the finished prompts kept."""

    async def one(index: int) -> None:
        finished(index, await generator.agenerate(list(prompts[index]), sampling))

    outcomes = await asyncio.gather(*(one(i) for i in todo), return_exceptions=True)
    failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if failures:
        raise GenerationError(
            f"{len(failures)} of {len(todo)} prompt(s) got no samples; the others are kept, rerun to "
            f"sample only the missing ones. First error: {failures[0]}"
        ) from failures[0]
