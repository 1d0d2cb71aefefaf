"""IFEval's four levels per evaluated stage from the eval-samples files (eval/levels.py)."""

import json
import math

from cascade_rl.eval.breakdown import ifeval_levels
from cascade_rl.eval.levels import levels_section, stage_levels
from cascade_rl.eval.runs import StageRecord

#: (strict, loose) follow lists per prompt: 3 prompts with 1, 2 and 3 instructions
BEFORE = [([False], [True]), ([True, False], [True, False]), ([False, False, False], [True, False, False])]
AFTER = [([True], [True]), ([True, True], [True, True]), ([False, True, False], [True, True, False])]


def write_stage(folder, name, prompts):
    samples = folder / name / "eval-samples"
    samples.mkdir(parents=True)
    lines = [
        {"prompt_index": i, "reward": float(all(strict)),
         "details": {"strict_follow_list": strict, "loose_follow_list": loose}}
        for i, (strict, loose) in enumerate(prompts)
    ]  # fmt: skip
    (samples / "ifeval.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return StageRecord(folder / name, 0, name, "eval", 0.0)


def test_each_level_has_its_error_and_paired_change(tmp_path):
    records = [write_stage(tmp_path, "base", BEFORE), write_stage(tmp_path, "ifrl", AFTER)]
    base, ifrl = stage_levels(records, "ifeval")
    # the values are IFEval's own four accuracies (instruction level: followed / all instructions)
    details = [{"strict_follow_list": s, "loose_follow_list": lo} for s, lo in AFTER]
    for level, value in ifeval_levels(details).items():
        if level != "unscored":
            assert math.isclose(ifrl["levels"][level]["value"], value)
    assert math.isclose(ifrl["levels"]["instruction_strict"]["value"], 100 * 4 / 6)
    assert "change" not in base["levels"]["prompt_strict"]
    change = ifrl["levels"]["prompt_strict"]
    assert math.isclose(change["change"], 100 * 2 / 3)  # prompts 1 and 2 now follow every instruction
    # paired: per-prompt differences (1, 1, 0) -> sd 0.577 / sqrt(3)
    assert math.isclose(change["change_stderr"], 100 * (1 / 3) ** 0.5 / 3**0.5)
    assert change["stderr"] > 0 and base["levels"]["instruction_strict"]["stderr"] > 0
    assert base["levels"]["instruction_loose"]["stderr"] == 0  # each prompt follows half of 2 on average


def test_the_report_section_names_every_level_and_skips_other_benchmarks(tmp_path):
    records = [write_stage(tmp_path, "base", BEFORE), write_stage(tmp_path, "ifrl", AFTER)]
    lines, numbers = levels_section(records, ["ifeval", "gsm8k"])
    text = "\n".join(lines)
    assert set(numbers) == {"ifeval"} and "gsm8k" not in text
    assert "| ifrl | 66.7 ± 33.3 (+66.7 ± 33.3)" in text
    for level in ("prompt_strict", "prompt_loose", "instruction_strict", "instruction_loose"):
        assert level in text
