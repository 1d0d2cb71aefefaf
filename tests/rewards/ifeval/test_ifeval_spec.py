"""Instruction declarations: kwargs read from checker signatures, validated with clear errors,
an explicit registry that rejects duplicates, and documentation tables kept complete (SPEC 6)."""

from __future__ import annotations

import pytest

from cascade_rl.rewards.ifeval import ifbench_checks, ifeval_checks, iftrain_checks
from cascade_rl.rewards.ifeval.spec import Count, Instruction, Letter, Relation, build_registry


def frequency(
    text: str, *, keyword: str, times: Count, relation: Relation, letter: Letter = "a", tags: list[str] | None = None
) -> bool:
    return True


SAMPLE = Instruction("sample:frequency", frequency, "{keyword} {relation} {times}")


def test_params_come_from_the_checker_signature() -> None:
    by_name = {p.name: p for p in SAMPLE.params}
    assert list(by_name) == ["keyword", "times", "relation", "letter", "tags"]
    assert by_name["times"].kind is int and by_name["times"].minimum == 0
    assert by_name["relation"].choices == ("less than", "at least")
    assert by_name["letter"].one_letter and not by_name["letter"].required


def test_arguments_coerce_and_reject_bad_values() -> None:
    assert SAMPLE.arguments({"keyword": "x", "times": 3.0, "relation": "at least"})["times"] == 3
    bad = [
        ({"times": -1}, r"'times' must be >= 0"),
        ({"times": True}, r"'times' must be a number"),
        ({"times": 2.5}, r"'times' must be an integer"),
        ({"keyword": "  "}, r"'keyword' must be a non-empty string"),
        ({"letter": "ab"}, r"'letter' must be a single letter"),
        ({"tags": "one"}, r"'tags' must be a non-empty list of strings"),
    ]
    for change, message in bad:
        with pytest.raises(ValueError, match=r"sample:frequency: kwarg " + message):
            SAMPLE.arguments({"keyword": "x", "times": 1, "relation": "at least", **change})
    with pytest.raises(ValueError, match="missing kwarg 'keyword'"):  # "" and [] mean unset
        SAMPLE.arguments({"keyword": "", "times": 1, "relation": "at least", "tags": []})
    with pytest.raises(ValueError, match="kwargs must be a dict"):
        SAMPLE.arguments(["keyword"])


def test_registry_rejects_duplicate_ids() -> None:
    with pytest.raises(ValueError, match="'sample:frequency' registered twice"):
        build_registry([[SAMPLE], [SAMPLE]])


def test_prompt_param_must_be_a_kwarg() -> None:
    with pytest.raises(ValueError, match="prompt_param 'prompt' is not a kwarg"):
        Instruction("sample:bad", frequency, "x", prompt_param="prompt")


@pytest.mark.parametrize(
    ("module", "group"),
    [
        (ifeval_checks, ifeval_checks.IFEVAL),
        (ifbench_checks, ifbench_checks.IFBENCH),
        (iftrain_checks, iftrain_checks.IFTRAIN),
    ],
)
def test_every_instruction_is_documented_with_its_kwargs(module, group) -> None:
    table_rows = {
        line.split("|")[1].strip(): line
        for line in module.__doc__.splitlines()
        if line.startswith("| ") and ":" in line.split("|")[1]
    }
    assert len(table_rows) == len(group)
    for instruction in group:
        assert instruction.id in table_rows, instruction.id
        kwargs_cell = table_rows[instruction.id].split("|")[2]
        for param in instruction.params:
            assert param.name in kwargs_cell, (instruction.id, param.name)


def test_taxonomy_sizes() -> None:
    assert len(ifeval_checks.IFEVAL) == 25
    assert len(ifbench_checks.IFBENCH) + len(iftrain_checks.IFTRAIN) >= 20
