"""A run's speed choices, settled for the machine it lands on (DESIGN: the paper's policy is
engine-neutral; engines and dtypes are this machine's business).

Three recipe settings may say ``auto``: ``runtime.use_vllm`` (the sampling engine),
``model.sample_dtype`` (the weights vLLM rollouts, evaluation and the prompt filter sample with)
and ``runtime.bf16`` (mixed precision in training). :func:`settle` decides them once, on the main
process, from what is installed and a probe of the hardware (:mod:`cascade_rl.hardware`), writes
``machine.json`` into the run directory (the CPU, its speed flags, the probe's GFLOPS, every
choice and why) and returns the recipe with concrete values, the same on every process. The
choice of engine is said once at start-up. ``machine.json`` also says what untrusted code runs in
(``sandbox``: bubblewrap, or rlimits only where the recipe's ``runtime.sandbox: rlimits`` or
``CASCADE_SANDBOX=rlimits`` opted in), which every process applies (:func:`use_sandbox`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cascade_rl import hardware, sandbox
from cascade_rl.llm.vllm_engine import choose_engine
from cascade_rl.recipe import Recipe, RecipeError, Runtime

MACHINE_FILE = "machine.json"


def decide(recipe: Recipe, model: Path | None) -> dict[str, Any]:
    """The concrete choices for this machine (main process), with the facts behind them."""
    runtime, spec = recipe.runtime, recipe.model
    use_sandbox(runtime)
    try:
        engine = choose_engine(runtime.use_vllm, model)
    except ValueError as error:
        raise RecipeError(f"runtime.use_vllm: true, but {error}") from None
    choices = {
        "use_vllm": engine.vllm,
        "engine": "vLLM" if engine.vllm else "llm/decode.py (the project's sampling loop)",
        "engine_reason": engine.reason,
        "bf16": hardware.bf16_is_fast() if runtime.bf16 == "auto" else runtime.bf16,
        "sample_dtype": hardware.resolve_dtype(spec.sample_dtype) if spec.sample_dtype == "auto" else spec.sample_dtype,
    }
    return {"machine": hardware.describe(), "choices": choices, "sandbox": sandbox.isolation_report()}


def use_sandbox(runtime: Runtime) -> None:
    """Apply ``runtime.sandbox`` to this process (every process of a run calls it)."""
    if runtime.sandbox == "rlimits":
        sandbox.allow_rlimits_only("runtime.sandbox: rlimits")


def apply(recipe: Recipe, decided: dict[str, Any]) -> Recipe:
    """``recipe`` with the ``auto`` settings replaced by the decided values (and its sandbox
    setting applied to this process)."""
    use_sandbox(recipe.runtime)
    choices = decided["choices"]
    runtime = recipe.runtime.model_copy(update={"use_vllm": choices["use_vllm"], "bf16": choices["bf16"]})
    model = recipe.model.model_copy(update={"sample_dtype": choices["sample_dtype"]})
    return recipe.model_copy(update={"runtime": runtime, "model": model})


def record(run_dir: Path, decided: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MACHINE_FILE).write_text(json.dumps(decided, indent=1))


def summary(decided: dict[str, Any]) -> str:
    """One line for the start of a run: the engine (and why when it is not vLLM), dtypes, the CPU."""
    choices, machine = decided["choices"], decided["machine"]
    engine = choices["engine"] if choices["use_vllm"] else f"{choices['engine']}: {choices['engine_reason']}"
    dtype = choices["sample_dtype"] or "model.dtype"
    where = "GPU" if machine["gpu"] else f"{machine['cpu']} ({', '.join(machine['speed_flags']) or 'no SIMD flags'})"
    return f"sampling: {engine}; sampling dtype {dtype}; on {where}{sandbox_note(decided.get('sandbox') or {})}"


def sandbox_note(record: dict[str, Any]) -> str:
    """What the start-up line says of the sandbox: nothing when programs run in bubblewrap."""
    if record.get("isolation") == "rlimits":
        return f"; untrusted code: rlimits only, NO isolation ({record.get('opted_in')}: {record.get('reason')})"
    if record.get("isolation") == "unavailable":
        return f"; untrusted code: refused (no isolation here: {record.get('reason')})"
    return ""


def local_engine(runtime: Runtime) -> str:
    """The engine of the samplers outside the trainer (prompt filter, evaluation) once settled."""
    return "vllm" if runtime.use_vllm is True else "transformers"
