"""Toy SWE: repositories with one observable bug; gold repairs, localisations and
reproduction tests are right."""

import random
import subprocess
import sys

import pytest

from cascade_rl.rewards.swe_edits import apply_patch
from cascade_rl.world import swe
from tests.world.conftest import draw


def instances(count, seed=0):
    rng = random.Random(seed)
    return [swe.swe_instance(rng) for _ in range(count)]


def test_same_seed_same_repositories():
    assert instances(10) == instances(10)
    assert instances(10) != instances(10, seed=1)


def test_every_bug_kind_occurs_and_the_golden_patch_fixes_it():
    found = instances(60)
    assert {i.kind for i in found} == set(swe.BUG_KINDS)
    for instance in found:
        patched = apply_patch(instance.files, swe.golden_patch(instance))
        assert {p: t for p, t in patched.items() if t is not None} == {
            p: t for p, t in instance.fixed_files.items() if p in patched
        }
        assert instance.problem_statement.startswith(f"Bug in {instance.path}, function {instance.function.name}: ")
        # the buggy line is quoted as the file has it, on its own line: the same tokens as the edit
        assert instance.problem_statement.endswith("\n" + instance.search.rstrip("\n"))
        assert instance.search in instance.files[instance.path]


def test_gold_repairs_score_one_and_a_no_op_scores_zero(score_gold):
    tasks = draw(lambda rng: swe.repair_task(rng, swe.swe_instance(rng)), 40)
    assert score_gold("swe", tasks, "think") == [1.0] * len(tasks)
    no_ops = []
    for task, _instance in zip(tasks[:5], instances(5)):
        search = task.answer.split("<<<<<<< SEARCH\n")[1].split("=======\n")[0]
        no_ops.append(
            task.__class__(
                **{
                    **task.__dict__,
                    "answer": task.answer.replace(
                        task.answer.split("=======\n")[1].split(">>>>>>> REPLACE")[0], search
                    ),
                }
            )
        )
    assert set(score_gold("swe", no_ops, "think")) == {0.0}


def test_mixed_prompts_show_another_module_and_ground_truth_prompts_only_the_buggy_file():
    rng = random.Random(3)
    instance = swe.swe_instance(rng)
    only = swe.repair_task(rng, instance, mixed=False).request
    mixed = swe.repair_task(rng, instance, mixed=True).request
    assert f"### {instance.path}" in only and f"### {instance.other_modules[0]}" not in only
    assert sum(f"### {p}" in mixed for p in instance.other_modules) == 1


def test_localization_answer_names_the_buggy_file():
    instance = instances(1)[0]
    task = swe.localization_task(instance)
    assert task.answer == f"```\n{instance.path}\n```"
    assert instance.problem_statement in task.request and "__init__.py" in task.request


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reproduction_test_reproduces_on_the_bug_and_resolves_on_the_fix(tmp_path, seed):
    instance = instances(1, seed=seed)[0]
    script = swe.reproduction_test(instance)
    for version, expected in ((instance.files, "Issue reproduced"), (instance.fixed_files, "Issue resolved")):
        root = tmp_path / expected.split()[1]
        for path, text in version.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        (root / "repro.py").write_text(script)
        result = subprocess.run([sys.executable, "repro.py"], cwd=root, capture_output=True, text=True, timeout=30)
        assert result.stdout.strip() == expected, result.stderr


def test_repair_edit_runs_from_the_def_line_through_the_change():
    """The edit's SEARCH starts at the buggy function's ``def`` line (the name the issue gives
    anchors the copy of the file's lines) and ends at the changed line; the trace names the file,
    the function and the change (docs/toy-world.md, "SWE")."""
    rng = random.Random(5)
    for instance in (swe.swe_instance(rng) for _ in range(20)):
        search, replace = instance.edit
        assert search.startswith(f"def {instance.function.name}(") and search.endswith(instance.search)
        assert replace.startswith(f"def {instance.function.name}(") and replace.endswith(instance.replace)
        assert instance.files[instance.path].count(search) == 1
        reasoning, answer = swe.repair_answer(instance)
        assert reasoning.startswith(f"The bug is in {instance.path}, function {instance.function.name}: ")
        assert f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE" in answer
        assert instance.problem_statement.endswith(f"The faulty line:\n{instance.search.rstrip()}")
