"""A run's ``auto`` settings, settled once for the machine it lands on (DESIGN: the paper's
policy is engine-neutral; engines and dtypes are this machine's business).

Five recipe settings may leave the choice to the machine, and each means one thing:

* ``runtime.use_vllm: auto`` -- vLLM when it imports and runs the model here
  (:func:`~cascade_rl.llm.vllm_engine.choose_engine`; ``CASCADE_VLLM=off`` in the environment
  turns it off on one machine, and the choice says so);
* ``model.dtype: auto`` -- the training weights: bfloat16 on a GPU, float32 on a CPU;
* ``model.sample_dtype`` -- the weights of sampling (vLLM rollouts, evaluation, the prompt filter,
  rejection sampling): unset = the training weights' dtype; ``auto`` = bfloat16 where this
  machine computes it fast (the start-up probe of :mod:`cascade_rl.hardware`), else float32;
* ``runtime.bf16`` -- mixed precision in training: unset = on a GPU; ``auto`` = where bfloat16
  is fast (the probe);
* ``runtime.lm_head: auto`` -- the per-token log-probability head: dense without a GPU, TRL's
  fused kernel with one (:mod:`cascade_rl.train.trl_backend`).

:func:`decide` settles them on the main process; :func:`record` writes ``machine.json`` into the
run directory (the CPU, its speed flags, the probe's GFLOPS, every choice and why);
:func:`apply` returns the recipe with concrete values, which every stage, the evaluation and the
report then read: training and evaluation load the same dtype. The functions below are the one
place each ``auto`` is resolved; a library caller that hands a stage an unsettled runtime gets
the same answers through :func:`settle_runtime`.

``machine.json`` also says what untrusted code runs in (``sandbox``: bubblewrap, or rlimits only
where the recipe's ``runtime.sandbox: rlimits`` or ``CASCADE_SANDBOX=rlimits`` opted in), which
every process applies (:func:`use_sandbox`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cascade_rl import hardware, sandbox
from cascade_rl.llm.vllm_engine import EngineChoice, choose_engine
from cascade_rl.recipe import Recipe, RecipeError, Runtime

MACHINE_FILE = "machine.json"


# ----------------------------------------------------------------------------- one rule per auto
def training_dtype(setting: str | None) -> str:
    """``model.dtype``: ``auto`` (or unset) = bfloat16 on a GPU, float32 on a CPU."""
    if setting in (None, "auto"):
        return "bfloat16" if hardware.has_gpu() else "float32"
    return str(setting)


def sampling_dtype(setting: str | None, training: str) -> str:
    """``model.sample_dtype``: unset = the training weights' dtype (``training``, settled);
    ``auto`` = bfloat16 where this machine computes it fast, else float32."""
    if setting is None:
        return training_dtype(training)
    return hardware.resolve_dtype(setting)


def mixed_precision(setting: bool | str | None) -> bool:
    """``runtime.bf16``: unset = on a GPU; ``auto`` = where bfloat16 is fast (the probe)."""
    if setting == "auto":
        return hardware.bf16_is_fast()
    return bool(setting) if setting is not None else hardware.has_gpu()


def lm_head(setting: str) -> str:
    """``runtime.lm_head``: ``auto`` = ``dense`` without a GPU (faster there), ``fused`` with one."""
    if setting not in ("auto", "fused", "dense"):
        raise ValueError(f"lm_head must be auto, fused or dense, got {setting!r}")
    if setting != "auto":
        return setting
    return "fused" if hardware.has_gpu() else "dense"


def engine(setting: bool | str, model: Path | None) -> EngineChoice:
    """``runtime.use_vllm``: the sampling engine for ``model`` on this machine; a recipe error
    naming the field when ``true`` cannot be honoured."""
    try:
        return choose_engine(setting, model)
    except ValueError as error:
        raise RecipeError(f"runtime.use_vllm: true, but {error}") from None


def settle_runtime(runtime: Runtime, use_vllm: bool | None = None) -> Runtime:
    """``runtime`` with its training choices concrete (``bf16``, ``lm_head``; ``use_vllm`` when
    given); a settled runtime comes back unchanged."""
    update: dict[str, Any] = {"bf16": mixed_precision(runtime.bf16), "lm_head": lm_head(runtime.lm_head)}
    if use_vllm is not None:
        update["use_vllm"] = use_vllm
    return runtime.model_copy(update=update)


# ----------------------------------------------------------------------------- the run's record
def decide(recipe: Recipe, model: Path | None) -> dict[str, Any]:
    """The concrete choices for this machine (main process), with the facts behind them."""
    runtime, spec = recipe.runtime, recipe.model
    use_sandbox(runtime)
    chosen = engine(runtime.use_vllm, model)
    dtype = training_dtype(spec.dtype)
    choices = {
        "use_vllm": chosen.vllm,
        "engine": "vLLM" if chosen.vllm else "llm/decode.py (the project's sampling loop)",
        "engine_reason": chosen.reason,
        "dtype": dtype,
        "sample_dtype": sampling_dtype(spec.sample_dtype, dtype),
        "bf16": mixed_precision(runtime.bf16),
        "lm_head": lm_head(runtime.lm_head),
    }
    return {"machine": hardware.describe(), "choices": choices, "sandbox": sandbox.isolation_report()}


def use_sandbox(runtime: Runtime) -> None:
    """Apply ``runtime.sandbox`` to this process (every process of a run calls it)."""
    if runtime.sandbox == "rlimits":
        sandbox.allow_rlimits_only("runtime.sandbox: rlimits")


def apply(recipe: Recipe, decided: dict[str, Any]) -> Recipe:
    """``recipe`` with every ``auto`` setting replaced by the decided value (and its sandbox
    setting applied to this process)."""
    use_sandbox(recipe.runtime)
    choices = decided["choices"]
    runtime = recipe.runtime.model_copy(
        update={"use_vllm": choices["use_vllm"], "bf16": choices["bf16"], "lm_head": choices["lm_head"]}
    )
    model = recipe.model.model_copy(update={"dtype": choices["dtype"], "sample_dtype": choices["sample_dtype"]})
    return recipe.model_copy(update={"runtime": runtime, "model": model})


def record(run_dir: Path, decided: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MACHINE_FILE).write_text(json.dumps(decided, indent=1))


def summary(decided: dict[str, Any]) -> str:
    """One line for the start of a run: the engine (and why when it is not vLLM), dtypes, the CPU."""
    choices, machine = decided["choices"], decided["machine"]
    engine = choices["engine"] if choices["use_vllm"] else f"{choices['engine']}: {choices['engine_reason']}"
    where = "GPU" if machine["gpu"] else f"{machine['cpu']} ({', '.join(machine['speed_flags']) or 'no SIMD flags'})"
    dtypes = f"training dtype {choices['dtype']}, sampling dtype {choices['sample_dtype']}"
    return f"sampling: {engine}; {dtypes}; on {where}{sandbox_note(decided.get('sandbox') or {})}"


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
