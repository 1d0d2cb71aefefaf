"""Toy code: gold programs pass their tests in the real sandbox, tests tell programs apart,
statements stay short enough for 9-gram decontamination."""

import re

from cascade_rl.world import programs
from cascade_rl.world.decontam import words
from tests.world.conftest import draw, gold_rewards


def test_same_seed_same_tasks():
    assert draw(programs.code_task, 40) == draw(programs.code_task, 40)


def test_gold_programs_pass_in_the_sandbox(score_gold):
    tasks = draw(programs.code_task, 60)
    assert score_gold("code", tasks, "think") == [1.0] * len(tasks)


def test_a_constant_printing_program_fails_every_family():
    tasks = draw(programs.code_task, 60)
    cheats = [
        t.__class__(
            **{
                **t.__dict__,
                "answer": "```python\nprint(" + repr(t.reference["tests"]["outputs"][0].strip()) + ")\n```",
            }
        )
        for t in tasks
    ]
    assert set(gold_rewards("code", cheats, "think")) == {0.0}


def test_statements_leave_no_nine_word_run_without_a_number():
    """Every statement puts a number (the constant or the example) within 8 words, so two
    tasks of a family only share a 9-gram when they share numbers."""
    for family in programs.FAMILIES:
        statement = family.statement.format(k=7)
        fixed = [w for w in words(statement) if not w.isdigit()]
        run = 0
        for word in words(statement) + ["example"]:
            run = 0 if word.isdigit() else run + 1
            assert run <= 8, family.name
        assert len(fixed) <= 8, family.name


def test_statement_example_is_the_program_output():
    for task in draw(programs.code_task, 30):
        example_in, example_out = re.search(r"Example: (.*) -> (.*)$", task.request).groups()
        source = task.answer.removeprefix("```python\n").removesuffix("```")
        assert programs.run_program(source, example_in + "\n").strip() == example_out
