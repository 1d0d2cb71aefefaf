"""The registry of ``cascade data convert`` formats (SPEC sections 3-6, 9, 11): the public
formats of benchmarks and datasets (:mod:`cascade_rl.data.convert`) and the paper's own released
datasets (:mod:`cascade_rl.data.released`), each under its name, with what it writes and the
suffix its prompts get; and :func:`converted`, the same conversion applied while a recipe's data
source or benchmark is read (``format:`` with ``format_options:``). One check of a format's
options (:func:`format_options`) serves the command and the recipes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cascade_rl.data import released
from cascade_rl.data.constrain.files import constrain
from cascade_rl.data.convert import (
    CHOICE_SUFFIX,
    MATH_SUFFIX,
    aime,
    bfcl,
    gsm8k,
    gsm8k_sft,
    helpsteer,
    humaneval,
    ifeval,
    livecodebench,
    mbpp,
    mbpp_sft,
    mcq,
    messages_row,
    nemo_gym,
    swebench,
    taco,
)
from cascade_rl.data.job import Drop
from cascade_rl.data.rows import iter_rows


@dataclass(frozen=True)
class Format:
    name: str
    convert: Callable[..., dict | Drop]
    writes: str
    suffix: str = ""

    def options(self) -> set[str]:
        """The options the converter takes (its keyword parameters but the row)."""
        return set(inspect.signature(self.convert).parameters) - {"row"}


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "nemo-gym",
            nemo_gym,
            "RL rows by NeMo Gym agent (math, code, ifeval, mcqa, workplace, ...) or SWE instances",
        ),
        Format("messages", messages_row, "SFT rows"),
        Format("helpsteer", helpsteer, "reward-model pairs (ties dropped)"),
        Format("aime", aime, "math RL rows", MATH_SUFFIX),
        Format("gsm8k", gsm8k, "math RL rows, worked solution kept (GSM8K)", MATH_SUFFIX),
        Format("ifeval", ifeval, "ifeval RL rows (IFEval and IFBench)"),
        Format("livecodebench", livecodebench, "code RL rows (public + private tests)"),
        Format("taco", taco, "code RL rows (TACO / APPS)"),
        Format("mbpp", mbpp, "code RL rows with assert tests (MBPP; --split)"),
        Format("gsm8k-sft", gsm8k_sft, "SFT rows: GSM8K worked solutions ending in \\boxed{answer}", MATH_SUFFIX),
        Format("mbpp-sft", mbpp_sft, "SFT rows: MBPP reference solutions in a python block (--split, train)"),
        Format("humaneval", humaneval, "code RL rows with assert tests (HumanEval)"),
        Format("mcq", mcq, "multiple_choice RL rows (MMLU, MMLU-Pro, GPQA)", CHOICE_SUFFIX),
        Format("bfcl", bfcl, "tool_call RL rows with their tools"),
        Format("swebench", swebench, "SWE instances for cascade swe"),
        Format("constrain", constrain, "ifeval RL rows: the text plus drawn constraints (cascade data constrain)"),
        Format(
            "nemotron-cascade-sft",
            released.nemotron_cascade_sft,
            "SFT rows, /think or /no_think per turn (Nemotron-Cascade-SFT-Stage-1, -Stage-2, -SFT-SWE)",
        ),
        Format(
            "nemotron-cascade-rl-if",
            released.nemotron_cascade_rl_if,
            "ifeval RL rows (Nemotron-Cascade-RL-Instruction-Following; option taxonomy)",
        ),
        Format(
            "nemotron-cascade-rl-math",
            released.nemotron_cascade_rl_math,
            "math RL rows; tasks without a checkable answer dropped (Nemotron-Cascade-RL-Math)",
            MATH_SUFFIX,
        ),
        Format("nemotron-cascade-rl-swe", released.nemotron_cascade_rl_swe, "swe RL rows (Nemotron-Cascade-RL-SWE)"),
        Format(
            "nemotron-cascade-rl-rlhf",
            released.nemotron_cascade_rl_rlhf,
            "preference RL rows (Nemotron-Cascade-RL-RLHF)",
        ),
        Format(
            "nemotron-cascade-rm", released.nemotron_cascade_rm, "reward-model pairs (Nemotron-Cascade-RM-Training)"
        ),
        Format(
            "nemotron-cascade-2-rl",
            released.nemotron_cascade_2_rl,
            "RL rows by NeMo Gym agent; rows without a reference dropped (Nemotron-Cascade-2-RL-data)",
        ),
        Format(
            "nemotron-cascade-2-sft",
            released.nemotron_cascade_2_sft,
            "SFT rows with tools; loss mask honoured (Nemotron-Cascade-2-SFT-Data)",
        ),
    )
}
FORMATS["ifbench"] = FORMATS["ifeval"]
FORMATS["apps"] = FORMATS["taco"]


def get_format(name: str, where: str) -> Format:
    if name not in FORMATS:
        raise ValueError(f"{where}: unknown format {name!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]


def format_options(spec: Format, options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``options`` for ``spec``'s converter, its suffix by default; an option the converter does
    not take is a ValueError naming ``where`` and the options it takes."""
    options = {"suffix": spec.suffix, **options}
    accepted = spec.options()
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValueError(f"{where}: format {spec.name} takes no option {unknown[0]!r}; options: {sorted(accepted)}")
    return options


def converted(
    name: str | None,
    options: Mapping[str, Any],
    normalise: Callable[[dict], dict],
    *,
    where: str,
    resolve: Callable[[str], Any] = str,
) -> Callable[[dict], dict]:
    """``normalise`` applied to each row after the public format ``name``'s converter (the
    converters of ``cascade data convert``; ``None``: no conversion), for a recipe's data source
    or benchmark named ``where``. A row the converter drops or finds malformed raises ValueError
    with the converter's reason (the loaders count and skip it). Unknown formats and options
    fail at once, naming ``where``; ``answers`` (BFCL) is read through ``resolve``."""
    if name is None:
        return normalise
    spec = get_format(name, where)
    options = format_options(spec, options, where)
    if "answers" in options:
        path = resolve(str(options["answers"]))
        if not path.is_file():
            raise FileNotFoundError(f"{where}: answers file not found: {path}")
        options["answers"] = load_answers(path)

    def normalise_converted(row: dict) -> dict:
        result = spec.convert(row, **options)  # a RowError is a ValueError: the row is skipped
        if isinstance(result, Drop):
            raise ValueError(result.reason)
        return normalise(result)

    return normalise_converted


def load_answers(path: Any) -> dict[str, Any]:
    """BFCL possible answers (``{"id", "ground_truth"}`` per line), by id."""
    return {str(row.data["id"]): row.data.get("ground_truth") for row in iter_rows(path) if "id" in row.data}
