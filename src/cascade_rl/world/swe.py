"""Toy SWE: tiny multi-file Python repositories with one injected bug and an issue text
(issue 4; SPEC sections 6 "SWE RL" and 7).

A repository is a package of two or three modules of short functions plus a test file, as
``files: {path: content}``. One function gets a bug (an operator, a constant, a comparison or a
loop bound changed); the issue names the file and the function, says what is wrong and quotes
the faulty line as the file has it (indented, on its own line), so issue, file and answer write
the code with the same tokens. The repair edit's SEARCH runs from the function's ``def`` line
through the faulty line: the name the issue gives anchors the copy of the file's lines.
From one instance the world makes the three SFT samples of the Agentless pipeline, each with
the prompts of appendix C.2 (:mod:`cascade_rl.swe.prompts`, :mod:`cascade_rl.rewards.swe_prompts`):

* **localisation**: issue + repository tree -> the buggy file's path in a fenced block;
* **repair**: issue + file contents -> ``<think>`` + one SEARCH/REPLACE edit in ``<solution>``;
* **test generation**: issue + golden patch + file -> a script printing "Issue reproduced" /
  "Issue resolved" / "Other issues";

(``prompt_style="compact"`` keeps the inputs and the answer formats but drops the ~330 tokens
of instructions the appendix prompts repeat in every sample, which a model of a few million
parameters trained for minutes pays for dearly; ``"agentless"`` is the paper's wording)

and the RL repair prompt (domain ``swe``: ``files`` + ``golden_patch``), shown either the buggy
file only or the buggy file with another module in shuffled order (the paper's ground-truth-only
and mixed prompts). Names are single words from small lists (:mod:`.vocab`): a tiny model
learned to copy numbers long before it could copy multi-piece identifiers such as
``geo_amount.find_depth`` (docs/toy-world.md). The fixed text of the issues, traces and function
bodies (:func:`generator_templates`) is decontamination scaffolding, like the prompt templates:
instances are told apart by their names, numbers and code order.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from cascade_rl.world.tasks import Task, pick, user
from cascade_rl.world.vocab import FUNCTIONS, MODULES, PACKAGES, VARIABLES

OPERATORS = {"+": "add", "-": "subtract", "*": "multiply"}
COMPARISONS = {">": ">=", ">=": ">", "<": "<=", "<=": "<"}


@dataclass(frozen=True)
class Function:
    """One generated function: its source with and without the bug, how to describe the
    bug, and arguments on which the buggy and the fixed versions differ."""

    name: str
    fixed: str
    buggy: str
    issue: str  # what is wrong, ending where the issue quotes the buggy line
    fix_note: str  # one line for the thinking trace
    probe: tuple[Any, ...]


#: Per bug kind, the issue's description of the bug and the repair trace's note (str.format
#: templates), and the function body (with ``{{op}}``-style slots). Their fixed text, like the
#: prompt templates', is scaffolding for decontamination: two repositories share it whatever
#: their names, so only names, numbers and code order tell instances apart (docs/toy-world.md).
TEXTS = {
    "operator": ("it should {right} {x} and {y}, but it {wrong}s them", "it uses {bad} where it should use {good}"),
    "constant": ("it should use {right}, but it uses {wrong}", "the constant should be {right}, not {wrong}"),
    "comparison": (
        "the check should be `{x} {right} {limit}`, but it is wrong at {limit}",
        "the comparison should be {right}, not {wrong}",
    ),
    "loop": ("the loop leaves out {n} itself", "the range should stop at {n} + 1"),
    "start": ("it starts {x} at 1 instead of 0", "{x} should start at 0"),
}
BODIES = {
    "operator": "def {n}({x}, {y}):\n    return {x} {op} {y}\n",
    "constant": "def {n}({x}):\n    return {x} {op} {k}\n",
    "comparison": "def {n}({x}):\n    if {x} {cmp} {k}:\n        return 0\n    return {x}\n",
    "loop": "def {name}({n}):\n    {x} = 0\n    for {i} in range(1, {stop}):\n"
    "        {x} += {i} * {f}\n    return {x}\n",
    "start": "def {n}({items}):\n    {x} = {start}\n    for {item} in {items}:\n"
    "        {x} += {item}\n    return {x}\n",
}


def _identifiers(rng: random.Random, count: int) -> list[str]:
    return rng.sample(VARIABLES, count)


def _arithmetic(rng: random.Random) -> Function:
    x, y = _identifiers(rng, 2)
    name = pick(rng, FUNCTIONS)
    right, wrong = rng.sample(sorted(OPERATORS), 2)
    body, (issue, note) = BODIES["operator"], TEXTS["operator"]
    return Function(
        name,
        body.format(n=name, x=x, y=y, op=right),
        body.format(n=name, x=x, y=y, op=wrong),
        issue.format(right=OPERATORS[right], x=x, y=y, wrong=OPERATORS[wrong]),
        note.format(bad=wrong, good=right),
        (7, 3),
    )


def _constant(rng: random.Random) -> Function:
    (x,) = _identifiers(rng, 1)
    name = pick(rng, FUNCTIONS)
    op = pick(rng, sorted(OPERATORS))
    right = rng.randint(2, 20)
    wrong = right + pick(rng, (-1, 1))
    body, (issue, note) = BODIES["constant"], TEXTS["constant"]
    return Function(
        name,
        body.format(n=name, x=x, op=op, k=right),
        body.format(n=name, x=x, op=op, k=wrong),
        issue.format(right=right, wrong=wrong),
        note.format(right=right, wrong=wrong),
        (5,),
    )


def _threshold(rng: random.Random) -> Function:
    (x,) = _identifiers(rng, 1)
    name = pick(rng, FUNCTIONS)
    right = pick(rng, sorted(COMPARISONS))
    wrong = COMPARISONS[right]
    limit = rng.randint(3, 50)
    body, (issue, note) = BODIES["comparison"], TEXTS["comparison"]
    return Function(
        name,
        body.format(n=name, x=x, cmp=right, k=limit),
        body.format(n=name, x=x, cmp=wrong, k=limit),
        issue.format(x=x, right=right, limit=limit),
        note.format(right=right, wrong=wrong),
        (limit,),
    )


def _loop(rng: random.Random) -> Function:
    x, n = _identifiers(rng, 2)
    name = pick(rng, FUNCTIONS)
    factor, index = rng.randint(2, 9), pick(rng, ("i", "j"))
    body, (issue, note) = BODIES["loop"], TEXTS["loop"]
    fixed = body.format(name=name, n=n, x=x, i=index, f=factor, stop=f"{n} + 1")
    buggy = body.format(name=name, n=n, x=x, i=index, f=factor, stop=n)
    return Function(name, fixed, buggy, issue.format(n=n), note.format(n=n), (4,))


def _start(rng: random.Random) -> Function:
    x, item = _identifiers(rng, 2)
    name = pick(rng, FUNCTIONS)
    body, (issue, note) = BODIES["start"], TEXTS["start"]
    fields = {"n": name, "x": x, "item": item, "items": f"{item}_list"}
    return Function(
        name,
        body.format(start=0, **fields),
        body.format(start=1, **fields),
        issue.format(x=x),
        note.format(x=x),
        ([2, 3],),
    )


BUG_KINDS: dict[str, Callable[[random.Random], Function]] = {
    "operator": _arithmetic,
    "constant": _constant,
    "comparison": _threshold,
    "loop": _loop,
    "start": _start,
}


def _healthy(rng: random.Random) -> str:
    """The source of a correct filler function (one of the bug kinds, fixed version)."""
    return BUG_KINDS[pick(rng, sorted(BUG_KINDS))](rng).fixed


@dataclass(frozen=True)
class Instance:
    """A repository with one bug, its issue and its fix."""

    files: dict[str, str]  # the buggy repository
    fixed_files: dict[str, str]  # the same repository with the bug fixed
    path: str  # the buggy file
    function: Function
    kind: str
    problem_statement: str

    @property
    def other_modules(self) -> list[str]:
        return sorted(
            p
            for p in self.files
            if p.endswith(".py") and p != self.path and "__init__" not in p and not p.startswith("tests/")
        )

    @property
    def search(self) -> str:
        return _changed_lines(self.files[self.path], self.fixed_files[self.path])[0]

    @property
    def replace(self) -> str:
        return _changed_lines(self.files[self.path], self.fixed_files[self.path])[1]

    @property
    def edit(self) -> tuple[str, str]:
        """The repair edit's SEARCH and REPLACE texts: the buggy function from its ``def`` line
        through the changed line(s), and the same lines fixed. Starting at the ``def`` line
        anchors the copy: the name the issue gives, then the file's lines in order."""
        return _through_change(self.function.buggy, self.function.fixed)

    @property
    def dotted(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".") + "." + self.function.name


def _changed_lines(before: str, after: str) -> tuple[str, str]:
    """The lines that differ between two versions of a file (the SEARCH and REPLACE texts)."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    start = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
    end = 0
    while end < min(len(old), len(new)) - start - 1 and old[-1 - end] == new[-1 - end]:
        end += 1
    return "".join(old[start : len(old) - end]), "".join(new[start : len(new) - end])


def _through_change(before: str, after: str) -> tuple[str, str]:
    """Both texts from their first line through their last changed line."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    end = 0
    while end < min(len(old), len(new)) - 1 and old[-1 - end] == new[-1 - end]:
        end += 1
    return "".join(old[: len(old) - end]), "".join(new[: len(new) - end])


def random_instance(rng: random.Random) -> Instance:
    """A package ``<pkg>/`` of two or three modules, a test file and one injected bug."""
    package = pick(rng, PACKAGES)
    modules = rng.sample(MODULES, rng.randint(2, 3))
    kind = pick(rng, sorted(BUG_KINDS))
    target = BUG_KINDS[kind](rng)
    buggy_module = pick(rng, modules)
    files, fixed = {f"{package}/__init__.py": ""}, {f"{package}/__init__.py": ""}
    for module in modules:
        functions = [_healthy(rng) for _ in range(rng.randint(0 if module == buggy_module else 1, 1))]
        path = f"{package}/{module}.py"
        if module == buggy_module:
            slot = rng.randint(0, len(functions))
            files[path] = "\n\n".join(functions[:slot] + [target.buggy] + functions[slot:])
            fixed[path] = "\n\n".join(functions[:slot] + [target.fixed] + functions[slot:])
        else:
            files[path] = fixed[path] = "\n\n".join(functions)
    test_path = f"tests/test_{buggy_module}.py"
    files[test_path] = fixed[test_path] = f"from {package}.{buggy_module} import {target.name}\n"
    path = f"{package}/{buggy_module}.py"
    return Instance(files, fixed, path, target, kind, issue_text(path, target))


#: The issue and the start of the repair trace (str.format templates).
ISSUE = "Bug in {path}, function {name}: {what}. The faulty line:\n{line}"
TRACE = "The bug is in {path}, function {name}: {note}."


def issue_text(path: str, function: Function) -> str:
    """The issue: the file and function, what is wrong, and the buggy line quoted as it stands
    in the file (indented, on its own line), so the issue, the file and the edit write the code
    with the same tokens (docs/toy-world.md, "SWE")."""
    line = _changed_lines(function.buggy, function.fixed)[0]
    return ISSUE.format(path=path, name=function.name, what=function.issue, line=line.rstrip())


def structure(files: dict[str, str]) -> str:
    """The repository tree as the localisation prompt shows it."""
    lines, seen = [], set()
    for path in sorted(files):
        parts = path.split("/")
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[: depth + 1])
            if folder not in seen:
                seen.add(folder)
                lines.append("    " * depth + parts[depth] + "/")
        lines.append("    " * (len(parts) - 1) + parts[-1])
    return "\n".join(lines)


def golden_patch(instance: Instance) -> str:
    from cascade_rl.rewards.swe_edits import unified_diff

    return unified_diff(instance.files, instance.fixed_files)


def shown_files(rng: random.Random, instance: Instance, *, mixed: bool) -> dict[str, str]:
    """The files a repair prompt shows: the buggy file, plus another module when ``mixed``
    (in random order)."""
    paths = [instance.path]
    if mixed and instance.other_modules:
        paths.append(pick(rng, instance.other_modules))
        rng.shuffle(paths)
    return {path: instance.files[path] for path in paths}


#: Share of repair prompts that show another module besides the buggy file (SPEC section 6:
#: ground-truth-only and mixed prompts).
MIXED_FRACTION = 0.3
PromptStyle = Literal["agentless", "compact"]
PROMPT_STYLES: tuple[PromptStyle, ...] = ("agentless", "compact")

#: The compact prompts: the same inputs and the same answer formats as appendix C.2, without
#: its ~330 tokens of instructions per prompt (``prompt_style="compact"``).
COMPACT_REPAIR = """Fix the issue with *SEARCH/REPLACE* edits.
--- BEGIN ISSUE ---
{problem_statement}
--- END ISSUE ---
--- BEGIN FILE ---
{content}
--- END FILE ---
Answer with <think>...</think> then the edits in ```diff blocks inside <solution>...</solution>."""
COMPACT_LOCALIZATION = """Which files must change to fix the issue? List at most {n} paths in a ``` block.
--- BEGIN ISSUE ---
{problem_statement}
--- END ISSUE ---
--- BEGIN STRUCTURE ---
{structure}
--- END STRUCTURE ---"""
COMPACT_TEST = """Write a test for the issue that prints "Issue reproduced", "Issue resolved" or "Other issues".
--- BEGIN ISSUE ---
{problem_statement}
--- END ISSUE ---
--- BEGIN PATCH ---
{model_patch}
--- END PATCH ---
--- BEGIN FILE ---
{content}
--- END FILE ---
Wrap the test in ```python...```."""


def _check_style(style: str) -> None:
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {style!r}")


def generator_templates() -> list[str]:
    """The fixed text of the toy repositories, issues and traces (decontamination scaffolding)."""
    return [ISSUE, TRACE, *BODIES.values(), *(text for pair in TEXTS.values() for text in pair)]


def prompt_templates() -> list[str]:
    """Every SWE prompt template of both styles (their fixed text is decontamination scaffolding)."""
    from cascade_rl.rewards.swe_prompts import REPAIR_PROMPT
    from cascade_rl.swe import prompts

    return [
        prompts.LOCALIZATION_PROMPT,
        REPAIR_PROMPT,
        prompts.REPRODUCTION_TEST_PROMPT,
        COMPACT_REPAIR,
        COMPACT_LOCALIZATION,
        COMPACT_TEST,
    ]


def repair_answer(instance: Instance) -> tuple[str, str]:
    """The gold (reasoning, answer) of the repair step: where the bug is, the line to change,
    then one SEARCH/REPLACE edit inside ``<solution>``."""
    reasoning = TRACE.format(path=instance.path, name=instance.function.name, note=instance.function.fix_note)
    search, replace = instance.edit
    edit = f"```diff\n### {instance.path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```"
    return reasoning, f"<solution>\n{edit}\n</solution>"


def repair_task(
    rng: random.Random, instance: Instance, *, mixed: bool | None = None, prompt_style: PromptStyle = "agentless"
) -> Task:
    """The repair prompt (appendix C.2, or its compact form) with its gold answer and the RL
    reference fields."""
    from cascade_rl.rewards.swe_prompts import format_files, repair_prompt

    _check_style(prompt_style)
    mixed = rng.random() < MIXED_FRACTION if mixed is None else mixed
    content = format_files(shown_files(rng, instance, mixed=mixed))
    if prompt_style == "agentless":
        text = repair_prompt(instance.problem_statement, content)
    else:
        text = COMPACT_REPAIR.format(problem_statement=instance.problem_statement, content=content)
    reasoning, answer = repair_answer(instance)
    return Task(
        domain="swe",
        kind=f"repair_{instance.kind}",
        prompt=user(text),
        reasoning=reasoning,
        answer=answer,
        source="swe",
        reference={
            "files": dict(instance.files),
            "golden_patch": golden_patch(instance),
            "problem_statement": instance.problem_statement,
        },
    )


def localization_task(instance: Instance, *, prompt_style: PromptStyle = "agentless") -> Task:
    from cascade_rl.swe.prompts import localization_messages

    _check_style(prompt_style)
    tree = structure(instance.files)
    if prompt_style == "agentless":
        messages = tuple(localization_messages(instance.problem_statement, tree, n=3))
    else:
        messages = user(COMPACT_LOCALIZATION.format(problem_statement=instance.problem_statement, structure=tree, n=3))
    reasoning = f"The issue names {instance.dotted}, which lives in {instance.path}."
    return Task(
        domain="swe_localization",
        kind=f"localize_{instance.kind}",
        prompt=messages,
        reasoning=reasoning,
        answer=f"```\n{instance.path}\n```",
        source="swe",
        reference={"gold_files": [instance.path]},
    )


def reproduction_test(instance: Instance) -> str:
    """A test script that prints "Issue reproduced" on the buggy code and "Issue resolved"
    on the fixed code (checked by running both versions)."""
    function = instance.function
    arguments = ", ".join(repr(a) for a in function.probe)
    expected = _call(instance.fixed_files[instance.path], function.name, function.probe)
    module = instance.path.removesuffix(".py").replace("/", ".")
    return (
        f"from {module} import {function.name}\n\n\ndef test_{function.name}():\n"
        f"    try:\n        result = {function.name}({arguments})\n    except Exception:\n"
        f'        print("Other issues")\n        return\n'
        f'    if result == {expected!r}:\n        print("Issue resolved")\n'
        f'    else:\n        print("Issue reproduced")\n\n\ntest_{function.name}()\n'
    )


def _call(source: str, name: str, arguments: tuple[Any, ...]) -> Any:
    """Call function ``name`` of a generated (trusted) module source."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "<toy>", "exec"), namespace)
    return namespace[name](*arguments)


def test_generation_task(instance: Instance, *, prompt_style: PromptStyle = "agentless") -> Task:
    from cascade_rl.rewards.swe_prompts import format_files
    from cascade_rl.swe.prompts import reproduction_test_messages

    _check_style(prompt_style)
    fields = {
        "problem_statement": instance.problem_statement,
        "model_patch": golden_patch(instance),
        "content": format_files({instance.path: instance.files[instance.path]}),
    }
    if prompt_style == "agentless":
        messages = tuple(reproduction_test_messages(**fields))
    else:
        messages = user(COMPACT_TEST.format(**fields))
    reasoning = (
        f"Call {instance.function.name}{instance.function.probe!r} and compare with the fixed result."
    ).replace(",)", ")")
    return Task(
        domain="swe_testgen",
        kind=f"testgen_{instance.kind}",
        prompt=messages,
        reasoning=reasoning,
        answer=f"```python\n{reproduction_test(instance)}```",
        source="swe",
    )


def probe_differs(instance: Instance) -> bool:
    """Whether the probe arguments tell the buggy function from the fixed one."""
    function = instance.function
    return _call(instance.files[instance.path], function.name, function.probe) != _call(
        instance.fixed_files[instance.path], function.name, function.probe
    )


def well_formed(instance: Instance) -> bool:
    """Function names unique in the repository, the SEARCH text unique in its file and the
    bug visible to the reproduction test's probe."""
    names = [
        line.split("(")[0] for text in instance.files.values() for line in text.splitlines() if line.startswith("def ")
    ]
    return (
        len(names) == len(set(names))
        and instance.files[instance.path].count(instance.search) == 1
        and instance.files[instance.path].count(instance.edit[0]) == 1
        and probe_differs(instance)
    )


def swe_instance(rng: random.Random) -> Instance:
    """A well-formed repository with one bug (redrawn otherwise)."""
    for _ in range(100):
        instance = random_instance(rng)
        if well_formed(instance):
            return instance
    raise RuntimeError("could not draw an SWE instance whose bug a test can observe")
