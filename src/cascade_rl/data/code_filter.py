"""Code RL's data filter (``cascade data code-filter``; SPEC section 6, Code RL; seed section
4.6.1): keep the problems whose tests the Code RL reward can trust.

The paper excludes problems that standard-output comparison cannot judge (interactive
problems, problems that need a special judge) and problems whose tests cover boundary and edge
cases too thinly (they reward wrong programs: false positives; or punish right ones: false
negatives), and deduplicates by the problem's source URL as well as by 9-grams (the 9-gram
step is ``cascade data decontaminate``). Each code row (``prompt``, ``tests``; ``solutions``,
``url``, ``source`` / ``platform``, ``question_id`` where the converters keep them) goes
through, in order:

1. **Judge kind** (the statement's text): an interactive problem ("this is an interactive
   problem", an ``Interaction`` section, "flush the output") or one with a special judge
   (any of several answers accepted: "print any of them", "if there are multiple solutions",
   a checker; or an answer tolerance looser than the reward's 1e-6, "absolute or relative error
   ... 10^-4") is dropped: comparing outputs would reject right programs.
2. **Reference solutions run on their own tests** in the project's sandbox, through the Code
   RL reward itself (:func:`cascade_rl.rewards.code.score_batch`, the same comparison as in
   training): up to ``max_solutions`` of the row's ``solutions`` in order, until one passes
   every test. A problem none of whose tried solutions passes is dropped (wrong tests, or a
   judge the comparison is not); when they all ran out of time the reason says so (a slow
   reference, or a loaded machine: ``time_limit``). A row without solutions is kept and counted as unchecked; a
   sandbox failure (no verdict) is not a failing solution: the row is kept, counted.
3. **Weak tests, measured by mutation**: ``mutants`` variants of the passing solution, each
   with one small change that makes a program wrong on some input -- a comparison turned
   (``<`` / ``<=``, ``>`` / ``>=``, ``==`` / ``!=``), an arithmetic operator swapped (``+`` /
   ``-``, ``*`` -> ``+``, ``//`` -> ``/``, ``%`` -> ``//``, ``&`` / ``|``), an integer constant
   under 1000 moved by one (1 becomes 0; larger ones are sentinels and bounds), ``and`` /
   ``or`` swapped, a ``not`` removed -- run on the tests; a mutant *survives* when it
   still passes them all. Off-by-one and boundary mutants are exactly what tests without
   boundary and edge cases let through, and a surviving mutant is a wrong program the reward
   would pay 1 for (a false positive). Some mutants are *equivalent* to the original (``>``
   and ``>=`` when finding a maximum; no input tells them apart) and would count against good
   tests: for standard-input problems each survivor is also run, with the reference solution,
   on ``variants`` new inputs (each a test input whose numbers after the first line -- the
   line of sizes -- are moved by up to 3); a survivor whose outputs match the reference's on
   all of them is taken as equivalent and left out of the count. (Call-based and assert-style
   tests get no such check: their survivors all count.) The measure is the share of the
   remaining mutants the tests kill, the standard adequacy measure of a test suite (mutation
   score), kept on each row as ``mutation_score``; a problem whose survivors exceed
   ``max_survival`` of them is dropped. A mutant that exceeds ``mutant_time_limit`` counts as
   killed (it fails a test).
4. **Source URL dedup**: the first kept row of each source problem stays; a later row with the
   same source is dropped. The source is the ``url`` (scheme, ``www.``, query, fragment and a
   trailing slash ignored; Codeforces' ``contest/N/problem/X`` and ``problemset/problem/N/X``
   are one problem), else ``platform`` + ``question_id`` (LiveCodeBench). Dedup runs after the
   checks, so a duplicate with stronger tests can take the place of a copy dropped for weak
   ones.

Rows without tests are dropped (``no tests``). Kept rows lose their ``solutions`` (not needed
for RL, and SFT-like text) unless ``keep_solutions``.
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cascade_rl.data.job import Drop, Keep, Summary, run_job
from cascade_rl.data.rows import Row, RowError, prompt_text

#: the comparison tolerance of the Code RL reward (rewards/code.py): looser problem tolerances need a checker
REWARD_TOLERANCE_EXPONENT = 6

_INTERACTIVE = re.compile(
    r"\binteractive (?:problem|task)\b|^[ \t]*-*[ \t]*interaction[ \t]*-*[ \t]*$|"
    r"\bflush (?:the )?(?:standard )?output\b|\bfflush\s*\(|\bsys\.stdout\.flush\b|\bcout\.flush\b",
    re.IGNORECASE | re.MULTILINE,
)
_SPECIAL_JUDGE = re.compile(
    r"\b(?:print|output|return|find)(?: out)? any "
    r"(?:of them|one of them|such|valid|correct|possible|suitable|solution|answer)|"
    r"\bany (?:of them|one of them) (?:is|will be) (?:accepted|correct)|"
    r"\bif there (?:are|is|exist) (?:several|multiple|many|more than one) (?:possible |valid |correct |optimal )?"
    r"(?:answers?|solutions?|ways|sequences|arrangements|orders)|"
    r"\b(?:multiple|several) (?:possible |valid |correct )?(?:answers|solutions) "
    r"(?:are|is) (?:possible|accepted|allowed)|"
    r"\bspecial judge\b|\bchecker\b|\bin any order\b",
    re.IGNORECASE,
)
_TOLERANCE = re.compile(
    r"(?:absolute|relative) (?:or (?:absolute|relative) )?error[^.]{0,80}?10\s*\^?\s*\{?\s*[-−–]\s*(\d+)\s*\}?|"
    r"(?:absolute|relative) (?:or (?:absolute|relative) )?error[^.]{0,80}?1e-(\d+)|"
    r"(?:within|up to|precision of) 10\s*\^?\s*\{?\s*[-−–]\s*(\d+)",
    re.IGNORECASE,
)


def judge_kind(text: str) -> str | None:
    """Why standard-output comparison cannot judge this statement, or None (module docstring, 1)."""
    if _INTERACTIVE.search(text):
        return "interactive problem"
    if _SPECIAL_JUDGE.search(text):
        return "special judge: several answers accepted"
    for match in _TOLERANCE.finditer(text):
        exponent = int(next(group for group in match.groups() if group))
        if exponent < REWARD_TOLERANCE_EXPONENT:
            return "special judge: answer tolerance looser than the comparison's"
    return None


def source_key(row: Mapping[str, Any]) -> str | None:
    """The problem's source identity (module docstring, 4), or None."""
    url = row.get("url")
    if isinstance(url, str) and url.strip():
        parts = urlsplit(url.strip() if "//" in url else f"//{url.strip()}")
        host = parts.netloc.lower().removeprefix("www.")
        path = parts.path.rstrip("/")
        contest = re.fullmatch(r"/(?:contest|problemset/problem|gym)/(\d+)(?:/problem)?/(\w+)", path)
        if host.endswith("codeforces.com") and contest:
            return f"codeforces:{contest.group(1)}{contest.group(2).upper()}"
        return f"{host}{path}"
    platform = row.get("platform") or row.get("source")
    question = row.get("question_id")
    if platform and question not in (None, ""):
        return f"{str(platform).lower()}:{question}"
    return None


def solutions_of(row: Mapping[str, Any]) -> list[str]:
    """The row's reference programs (``solutions``: a list, or JSON text of one)."""
    value = row.get("solutions")
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise RowError("solutions is not a JSON list of programs") from None
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RowError("solutions is not a list of programs")
    return [v for v in value if v.strip()]


# ---------------------------------------------------------------------------------- mutants

_COMPARE_SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
_ARITHMETIC_SWAPS = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
#: integer constants this large are sentinels and bounds (-10**5 as "minus infinity"): moved by one
#: they rarely change a program, so they are not mutated
_SMALL_CONSTANT = 1000


def _sites(tree: ast.AST) -> list[tuple[ast.AST, int]]:
    """Every (node, operand index) one mutation can change."""
    sites: list[tuple[ast.AST, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sites += [(node, i) for i, op in enumerate(node.ops) if type(op) in _COMPARE_SWAPS]
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITHMETIC_SWAPS:
            sites.append((node, 0))
        elif isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < _SMALL_CONSTANT:
            sites.append((node, 0))
        elif isinstance(node, ast.BoolOp) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
            sites.append((node, 0))
    return sites


def _mutate(node: ast.AST, index: int) -> ast.AST | None:
    """Apply the mutation of one site in place; returns a replacement node for ``not x``."""
    if isinstance(node, ast.Compare):
        node.ops[index] = _COMPARE_SWAPS[type(node.ops[index])]()
    elif isinstance(node, (ast.BinOp, ast.AugAssign)):
        node.op = _ARITHMETIC_SWAPS[type(node.op)]()
    elif isinstance(node, ast.Constant):
        node.value = node.value + 1 if node.value != 1 else 0
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.UnaryOp):
        return node.operand
    return None


class _Replace(ast.NodeTransformer):
    def __init__(self, old: ast.AST, new: ast.AST) -> None:
        self.old, self.new = old, new

    def visit(self, node: ast.AST) -> ast.AST:
        return self.new if node is self.old else self.generic_visit(node)


def mutants(source: str, count: int, seed: int | str = 0) -> list[str]:
    """Up to ``count`` distinct programs, each ``source`` with one mutation (module docstring, 3),
    at sites drawn with ``seed``; none when the source does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    original = ast.unparse(tree)
    sites = list(range(len(_sites(tree))))
    random.Random(f"{seed}").shuffle(sites)
    found: list[str] = []
    for site in sites:
        if len(found) >= count:
            break
        copy = ast.parse(source)
        node, index = _sites(copy)[site]
        replacement = _mutate(node, index)
        if replacement is not None:
            copy = _Replace(node, replacement).visit(copy)
        text = ast.unparse(ast.fix_missing_locations(copy))
        if text != original and text not in found:
            found.append(text)
    return found


# ----------------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class FilterSettings:
    """How reference solutions and mutants run (module docstring)."""

    max_solutions: int = 3
    mutants: int = 10
    max_survival: float = 0.2
    variants: int = 8
    time_limit: float = 6.0
    mutant_time_limit: float = 2.0
    workers: int | None = None
    keep_solutions: bool = False
    seed: int = 0


def _program(source: str) -> str:
    return f"```python\n{source}\n```"


def _runs(requests: list[dict], settings: FilterSettings, time_limit: float) -> list:
    """Scores of many programs on their rows' tests, in parallel in the sandbox."""
    from cascade_rl.rewards.code import score_batch

    if not requests:
        return []
    return score_batch(requests, workers=settings.workers, time_limit=time_limit, stop_on_failure=True)


@dataclass
class _Checked:
    """What running a row's programs found."""

    outcome: str  # "passed", "failed", "timed out", "unchecked: ...", "tests cannot run"
    solution: str | None = None
    mutation_score: float | None = None
    survivors: int = 0
    tried: int = 0


def _check_solutions(rows: list[Mapping[str, Any]], settings: FilterSettings) -> list[_Checked]:
    """Run each row's reference solutions, up to ``max_solutions``, all rows at once."""
    requests, owners = [], []
    for number, row in enumerate(rows):
        for solution in solutions_of(row)[: settings.max_solutions]:
            requests.append({"response": _program(solution), "tests": row["tests"], "prompt": row.get("prompt")})
            owners.append((number, solution))
    checked = [_Checked("unchecked: no reference solution") for _ in rows]
    verdicts: dict[int, list] = {}
    for (number, solution), score in zip(owners, _runs(requests, settings, settings.time_limit)):
        verdicts.setdefault(number, []).append((solution, score))
    for number, results in verdicts.items():
        passing = next((solution for solution, score in results if score.reward == 1.0 and not score.masked), None)
        if passing is not None:
            checked[number] = _Checked("passed", passing)
        elif any(score.details.get("error") for _, score in results):
            checked[number] = _Checked("tests cannot run")
        elif all(score.masked for _, score in results):
            checked[number] = _Checked("unchecked: no verdict (sandbox)")
        elif all(score.details.get("timeout") for _, score in results if not score.masked):
            checked[number] = _Checked("timed out")
        else:
            checked[number] = _Checked("failed")
    return checked


def _check_mutants(rows: list[Mapping[str, Any]], checked: list[_Checked], settings: FilterSettings) -> None:
    """Run the mutants of each passing solution; fill in the mutation scores."""
    requests, owners = [], []
    for number, (row, check) in enumerate(zip(rows, checked)):
        if check.outcome != "passed" or settings.mutants < 1:
            continue
        seed = f"{settings.seed}:{source_key(row) or row.get('id') or number}"
        for mutant in mutants(check.solution or "", settings.mutants, seed):
            requests.append({"response": _program(mutant), "tests": row["tests"], "prompt": row.get("prompt")})
            owners.append(number)
    survivors: dict[int, list[str]] = {}
    tried: dict[int, int] = {}
    for number, request, score in zip(owners, requests, _runs(requests, settings, settings.mutant_time_limit)):
        if score.masked:
            continue
        tried[number] = tried.get(number, 0) + 1
        if score.reward == 1.0:
            survivors.setdefault(number, []).append(request["response"])
    equivalent = _equivalent_survivors(rows, checked, survivors, settings)
    for number, count in tried.items():
        count -= equivalent.get(number, 0)
        alive = len(survivors.get(number, [])) - equivalent.get(number, 0)
        checked[number].tried, checked[number].survivors = count, alive
        checked[number].mutation_score = round((count - alive) / count, 4) if count else None


def input_variants(inputs: Sequence[Any], count: int, seed: str) -> list[str]:
    """Up to ``count`` new standard inputs: a test input (drawn with ``seed``) whose integers
    after its first line are each moved by -3..3 (a one-line input is moved whole)."""
    texts = [text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text) for text in inputs]
    rng = random.Random(seed)
    found: list[str] = []
    for _ in range(count * 3):
        if len(found) >= count or not texts:
            break
        lines = rng.choice(texts).split("\n")
        start = 1 if len(lines) > 1 and any(line.strip() for line in lines[1:]) else 0
        for index in range(start, len(lines)):
            lines[index] = re.sub(r"-?\b\d+\b", lambda m: str(int(m.group()) + rng.randint(-3, 3)), lines[index])
        text = "\n".join(lines)
        if text not in texts and text not in found:
            found.append(text)
    return found


def _equivalent_survivors(
    rows: list[Mapping[str, Any]], checked: list[_Checked], survivors: dict[int, list[str]], settings: FilterSettings
) -> dict[int, int]:
    """Per row, the surviving mutants that answer every input variant as its reference
    solution does (standard-input tests only)."""
    from cascade_rl.rewards.code import parse_tests
    from cascade_rl.sandbox import Limits, shared_pool

    pool = shared_pool(settings.workers)
    limits = Limits(time_s=settings.time_limit)
    requests, owners = [], []
    for number, programs in survivors.items():
        suite = parse_tests(rows[number]["tests"])
        if suite.fn_name is not None or suite.asserts is not None or not suite.inputs:
            continue
        seed = f"{settings.seed}:variants:{number}"
        variants = input_variants(suite.inputs, settings.variants, seed)
        runs = [pool.submit_python(checked[number].solution or "", stdin=v.encode(), limits=limits) for v in variants]
        answered = [(v, run.result()) for v, run in zip(variants, runs)]
        good = [(v, result.stdout_text) for v, result in answered if result.ok]
        if not good:
            continue
        tests = {"inputs": [v for v, _ in good], "outputs": [out for _, out in good]}
        requests += [{"response": program, "tests": tests} for program in programs]
        owners += [number] * len(programs)
    equivalent: dict[int, int] = {}
    for number, score in zip(owners, _runs(requests, settings, settings.mutant_time_limit)):
        if score.reward == 1.0 and not score.masked:
            equivalent[number] = equivalent.get(number, 0) + 1
    return equivalent


def _static_check(data: Mapping[str, Any]) -> Drop | RowError | None:
    """Rules that need no execution: tests present, a judge the comparison is."""
    if data.get("domain", "code") != "code":
        return RowError(f"not a code row (domain {data.get('domain')!r})")
    tests = data.get("tests")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError:
            return RowError("tests is not valid JSON")
    if not tests or (isinstance(tests, Mapping) and not (tests.get("inputs") or tests.get("asserts"))):
        return Drop("no tests")
    kind = judge_kind(prompt_text(data))
    if kind:
        return Drop(kind)
    try:
        solutions_of(data)
    except RowError as error:
        return error
    return None


def code_filter_files(
    inputs: Sequence[Path], output: Path, *, settings: FilterSettings | None = None, **job: Any
) -> Summary:
    """Filter code rows (module docstring); the summary counts each drop reason, and its
    ``extra`` the rows kept unchecked and the mutation scores."""
    settings = settings or FilterSettings()
    kept_sources: set[str] = set()
    tallies = {"kept, solution passed": 0, "kept unchecked: no reference solution": 0, "kept unchecked: no verdict": 0}
    scores: list[float] = []

    def process(rows: Sequence[Row]) -> list:
        outcomes: list = [_static_check(row.data) for row in rows]
        live = [number for number, outcome in enumerate(outcomes) if outcome is None]
        data = [rows[number].data for number in live]
        checked = _check_solutions(data, settings)
        _check_mutants(data, checked, settings)
        for number, row, check in zip(live, data, checked):
            outcomes[number] = _decide(row, check)
        return outcomes

    def _decide(row: Mapping[str, Any], check: _Checked) -> Drop | Keep:
        if check.outcome == "failed":
            return Drop("reference solutions fail their tests")
        if check.outcome == "timed out":
            return Drop("reference solutions exceed the time limit")
        if check.outcome == "tests cannot run":
            return Drop("tests cannot run")
        if check.tried and check.survivors / check.tried > settings.max_survival:
            return Drop(f"weak tests: over {settings.max_survival:.0%} of mutants pass")
        key = source_key(row)
        if key is not None and key in kept_sources:
            return Drop("duplicate source URL")
        if key is not None:
            kept_sources.add(key)
        tallies[_tally(check.outcome)] += 1
        if check.mutation_score is not None:
            scores.append(check.mutation_score)
        kept = {k: v for k, v in row.items() if k != "solutions" or settings.keep_solutions}
        return Keep([{**kept, "mutation_score": check.mutation_score}])

    def warm(data: dict) -> None:
        if (key := source_key(data)) is not None:
            kept_sources.add(key)

    def extra() -> dict:
        mean = round(sum(scores) / len(scores), 4) if scores else None
        return {"kept rows": [{"check": k, "rows": v} for k, v in tallies.items()], "mean mutation score": mean}

    options = {k: v for k, v in vars(settings).items() if k != "workers"}
    return run_job(
        "code-filter", inputs, output, process, options=options, warm=warm, extra=extra, batch_size=32, **job
    )


def _tally(outcome: str) -> str:
    if outcome == "passed":
        return "kept, solution passed"
    return "kept unchecked: no verdict" if "verdict" in outcome else "kept unchecked: no reference solution"
