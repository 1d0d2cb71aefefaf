"""The Code RL reward (SPEC section 6): 1 only if the program passes **all** tests, else 0.

Pipeline for one response:

1. :func:`cascade_rl.chat.split_thinking`; an unfinished thinking response scores 0.
2. Language mixing (:func:`cascade_rl.rewards.language.is_mixed` on the whole response) scores
   ``language_penalty`` (the paper: 0 for code; -1, used for math, hurt code).
3. :func:`extract_code` takes the program from the *answer* (rule below); none scores 0.
4. Every test runs in the sandbox (:mod:`cascade_rl.sandbox`, one persistent sandbox per pool
   worker; a fork per stdin / call-based test, one process for all of a program's
   assert-style tests) and is judged **outside** the program's process: expected outputs are
   never written anywhere the program can see, nor passed in argv or the environment. Every
   test runs whatever the earlier ones gave: a program never learns whether an answer was
   accepted (issue 40: one stopped at its first wrong answer could tell, and hand that to the
   prompt's next rollout). ``stop_on_failure`` (default) stops only at a failure the program
   sees for itself (:data:`SEEN_BY_THE_PROGRAM`: it crashed, timed out, hit a limit), which
   keeps the costly case (a time limit per test) short and tells the program nothing. Outputs
   are compared only after the program's last run (a comparison's length must not delay a run
   the program could time).

Code extraction rule: the **last** fenced block tagged ``python``, ``py``, ``python3`` or
``py3`` (any case, backtick or tilde fence, any indentation; the body is dedented); when there
is none, the last untagged block that parses as Python and uses a statement keyword or
``print``/``input``. Blocks tagged with another language, and an unclosed last fence (a
truncated response), are never used.

Tests: ``{"inputs": [...], "outputs": [...], "fn_name": optional}``, or the same as a JSON
string. Without ``fn_name`` each test is one stdin/stdout run (an input or output given as a
list of lines is joined with newlines). With ``fn_name`` tests are call-based (LeetCode /
LiveCodeBench style): the program defines ``class Solution`` with a method ``fn_name`` (tried
first) or a top-level function ``fn_name``; an input is either a string of newline-separated
JSON values (LiveCodeBench) or a list of arguments (TACO); an expected output is a JSON value
or a JSON string of one; a one-element list also accepts its element (APPS convention). The
program runs with a LeetCode-style prelude (``from typing/collections/heapq/bisect/itertools/
functools import *``, ``import math, re, string, sys``). An expected output given as text
that holds a JSON value other than a string (``"1000"``, ``"[1, 2]"``) also matches a
returned string equal to that text (TACO lists such outputs as plain values).

Assert-style tests (MBPP, HumanEval): ``{"asserts": ["assert f(1) == 2", ...], "setup":
optional code, "prelude": optional code}``. Each statement is one test, as if run after
``prelude`` (HumanEval's prompt: its imports and helper functions; the program's own
definitions replace its stubs), the program and ``setup`` (MBPP's ``test_setup_code``,
HumanEval's ``check``), but the program's process never judges one
(:mod:`cascade_rl.rewards.code_asserts` has the rules and the threat model): a statement
``assert CALL == VALUE`` (and the other lifted forms, HumanEval ``check`` bodies made of them
included) sends only ``CALL`` to the program, whose result comes back as a plain value (exact
built-in types) and is compared here; any other statement runs in a *tester*, a second
sandboxed process that calls the program's functions through a socket carrying plain values
only. All of a program's tests run in one process of the program (as MBPP's and HumanEval's
own harnesses do: it loads once; ``__name__`` is ``"solution"``, so a ``__main__`` block does
not run), each statement within the time limit, every call answered whatever the verdicts, a
new process for the tests after a crash or a timeout (with ``stop_on_failure=False``). In the
tester, assertions are recorded rather than raised (the tests' code goes on making every call it
would make had they passed) and an exception of the program comes back as an ordinary error of
its nearest built-in class, never StopIteration or another that steers control flow (issue 40).
A failing comparison or ``AssertionError`` is a
``wrong_answer``, an exception of the program a ``runtime_error`` (``MemoryError``:
``memory``); a program that ends before answering fails the test. Rows whose tests cannot run
without trusting the program are a named error (``details["error"]``).

``details["results"]`` lists each test's outcome in order: ``pass``, the failure kind, or
``not_run`` (after a failure the program saw, with ``stop_on_failure``). A failure of the
sandbox itself (it could not start, died, did not answer; the pool's worker failed) is no
verdict (:meth:`Score.no_verdict`, left out of training), never a 0; a program's own crash,
timeout or wrong output is a verdict. Where untrusted code cannot be isolated and nobody opted
into rlimits only, scoring raises :class:`~cascade_rl.sandbox.IsolationUnavailable`.

Output comparison (stdin/stdout), by the type of the expected value as LiveCodeBench's and
TACO's checkers compare (issue 40): line by line, trailing whitespace of each line stripped,
trailing empty lines ignored, each line split on whitespace into tokens. An expected token that
is an integer or text matches only the identical token (``1000000.0``, ``1e6``, ``+5``,
``007`` are not ``1000000``, ``5``, ``7``: TACO compares text; LiveCodeBench compares these
numbers exactly, never within a tolerance); an expected floating-point token (a ``.`` or an
exponent) matches any number within 1e-6 of it, absolute or relative to ``max(|expected|,
1)`` (NeMo Gym's LiveCodeBench checker, Nemotron-Cascade's verifier, which takes the tolerance
whichever side is a float: an integer answer printed ``%.6e`` passed it). No case folding.
Call-based results compare as JSON values by the same rule: an expected integer only by an
integer, a float by a number within the tolerance, a bool only by a bool. A non-finite number
(``inf``, ``nan``; ``1e400`` is finite here, numbers are exact decimals) equals only the same
non-finite number, never a finite one, on every path (stdout tokens, returned values, the
result channel).

Whatever a program prints or writes, the host compares it in bounded time and memory: number
tokens are matched without backtracking, integers longer than :data:`INT_DIGITS` digits stay
text (:class:`BigInt`; ``int()`` of a long string is quadratic), an exponent beyond what
``Decimal`` holds makes a token non-numeric, and result-channel JSON nested more than
:data:`MAX_JSON_DEPTH` deep is refused before parsing. An output that still breaks the
comparison fails that test (``wrong_answer``, with the reason in ``first_failure.error``);
anything else that goes wrong with one program scores it 0 with the error, so a batch always
returns a Score per request and nothing is re-run.

The harness inside the sandbox lifts the int-to-str digit limit, sets the recursion limit to
``RECURSION_LIMIT`` (the main thread may grow its stack up to the memory limit), and gives the
program the ``sys.stdin`` / ``sys.stdout`` CPython makes when they are pipes, as a judge runs
``python3 solution.py < input > output``: stdout is block-buffered, so ``print`` text waits
in its buffer while ``sys.stdout.buffer.write`` bytes go first unless the program flushes
(CPython is write-through only under ``-u`` / ``PYTHONUNBUFFERED``). A call-based result goes
back through a separate pipe (fd 3), never through stdout, so printed text cannot pose as a
result; a program that writes to that pipe itself can only claim a value it could have
returned, since the verdict is computed outside from expected values it never sees.

**Why one file of about 820 lines** (DESIGN.md: files over ~500 lines say why): one module
per reward domain (the registry's ``cascade_rl.rewards.code:score``); which code block counts,
how outputs and returned values compare, the three test kinds and how they run in the
sandbox are together the definition of the reward, each section using the ones above it (the
assert-style plan and the programs that run it in the sandbox are modules of their own).
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import Any

from cascade_rl.chat import split_thinking
from cascade_rl.rewards import code_asserts
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.code_asserts import (
    AssertTests,
    Judge,
    Outcome,
    TestsBroken,
    lines_per_statement,
    program_source,
    requests,
    tester_source,
)
from cascade_rl.rewards.language import is_mixed
from cascade_rl.sandbox import (
    IsolationUnavailable,
    Limits,
    RunResult,
    SandboxError,
    SandboxPool,
    isolation,
    shared_pool,
)

DEFAULT_TIME_LIMIT_S = 6.0  # per test, LiveCodeBench's timeout
DEFAULT_MEMORY_MB = 2048  # address space per process
DEFAULT_OUTPUT_BYTES = 8 * 1024 * 1024
RECURSION_LIMIT = 1_000_000
TOLERANCE = 1e-6
STDERR_TAIL = 1000
PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
OPTION_NAMES = ("language_penalty", "time_limit", "memory_mb", "output_bytes", "stop_on_failure", "cpu_limit")

CALL_PRELUDE = (
    "from typing import *\nfrom collections import *\nfrom heapq import *\n"
    "from bisect import *\nfrom itertools import *\nfrom functools import *\n"
    "import math, re, string, sys, collections, heapq, bisect, itertools, functools\n"
)

# The call-based driver; the candidate's source and fn_name are inserted as literals.
CALL_DRIVER = """\
import json as _json, os as _os, sys as _sys
_dumps, _write = _json.dumps, _os.write   # bound before the program can replace them
_arguments = _json.loads(_sys.stdin.read())
_namespace = {{"__name__": "solution", "__builtins__": __builtins__}}
exec({prelude!r}, _namespace)
exec(compile({source!r}, "solution.py", "exec"), _namespace)
_solution = _namespace.get("Solution")
if isinstance(_solution, type) and hasattr(_solution, {fn_name!r}):
    _target = getattr(_solution(), {fn_name!r})
elif callable(_namespace.get({fn_name!r})):
    _target = _namespace[{fn_name!r}]
else:
    raise SystemExit("no class Solution with a method " + {fn_name!r} + " and no function " + {fn_name!r})
_result = _target(*_arguments)
_write(3, _dumps(_result, default=lambda v: sorted(v) if isinstance(v, (set, frozenset)) else repr(v)).encode())
"""

# ----------------------------------------------------------------------------------------------
# extraction

_FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
_PYTHON_HINT = re.compile(r"\b(def|import|print|input|class|for|while|return|lambda|if)\b")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every closed fenced block of ``text`` as (language tag in lower case, dedented body)."""
    blocks: list[tuple[str, str]] = []
    fence, language, body = None, "", []
    for line in text.split("\n"):
        if fence is None:
            match = _FENCE_OPEN.match(line)
            if match:
                fence, language, body = match.group(2), match.group(3).lower(), []
            continue
        stripped = line.strip()
        if stripped.startswith(fence) and stripped == fence[0] * len(stripped):
            blocks.append((language, textwrap.dedent("\n".join(body))))
            fence = None
        else:
            body.append(line)
    return blocks


def _looks_like_python(body: str) -> bool:
    if not _PYTHON_HINT.search(body):
        return False
    try:
        ast.parse(body)
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError, RecursionError, MemoryError
        return False
    return True


def extract_code(answer: str) -> str | None:
    """The program of an answer (rule in the module docstring), or None."""
    blocks = code_blocks(answer or "")
    tagged = [body for language, body in blocks if language in PYTHON_TAGS and body.strip()]
    if tagged:
        return tagged[-1]
    untagged = [body for language, body in blocks if not language and _looks_like_python(body)]
    return untagged[-1] if untagged else None


# ----------------------------------------------------------------------------------------------
# comparison

# Digit runs are matched atomically ("(?=(\d+))\1": a lookahead is never re-entered), so a
# token that is almost a number fails in one pass, never by backtracking through its digits.
_INTEGER = re.compile(r"[+-]?(?=(\d+))\1")
_NUMBER = re.compile(r"[+-]?(?:(?=(\d+))\1(?:\.(?=(\d*))\2)?|\.(?=(\d+))\3)(?:[eE][+-]?(?=(\d+))\4)?")
_DECIMALS = Context(prec=60, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation])
#: JSON integers longer than this stay text (int() of a long string takes quadratic time)
INT_DIGITS = 4000
#: JSON on the result channel nested deeper than this (up to twice) is not parsed: no
#: legitimate result is, and the parser recurses
MAX_JSON_DEPTH = 100
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class BigInt(str):
    """A JSON integer of more than :data:`INT_DIGITS` digits, kept as its text: compared
    exactly with integers, in linear time."""


def _parse_int(text: str) -> int | BigInt:
    return int(text) if len(text) <= INT_DIGITS else BigInt(text)


def _close_to_float(actual: Decimal, expected: Decimal, tolerance: float) -> bool:
    """Whether ``actual`` is within ``tolerance`` of a floating-point expected value: absolute,
    or relative to ``max(|expected|, 1)`` (the expected value's scale only: an answer cannot
    widen its own tolerance). A non-finite number equals only the same non-finite number (inf
    and inf of one sign, NaN and NaN), never a finite one."""
    if not (actual.is_finite() and expected.is_finite()):
        if actual.is_nan() or expected.is_nan():
            return actual.is_nan() and expected.is_nan()
        return actual.is_infinite() and expected.is_infinite() and actual.is_signed() == expected.is_signed()
    try:
        difference = _DECIMALS.abs(_DECIMALS.subtract(actual, expected))
        scale = _DECIMALS.max(_DECIMALS.abs(expected), Decimal(1))
        return difference <= _DECIMALS.multiply(Decimal(tolerance), scale)
    except (ArithmeticError, ValueError):
        return False


def _decimal(token: str) -> Decimal | None:
    """The exact value of a number token, or None (an exponent beyond what Decimal holds)."""
    try:
        return Decimal(token)
    except (ArithmeticError, ValueError):
        return None


def tokens_equal(actual: str, expected: str, tolerance: float = TOLERANCE) -> bool:
    """One token of output against the expected token (module docstring): identical, or, where
    the expected token is a floating-point number (a ``.`` or an exponent), a number within the
    tolerance. An expected integer or text matches only itself."""
    if actual == expected:
        return True
    if _INTEGER.fullmatch(expected) or not _NUMBER.fullmatch(expected) or not _NUMBER.fullmatch(actual):
        return False
    a, e = _decimal(actual), _decimal(expected)
    return a is not None and e is not None and _close_to_float(a, e, tolerance)


def _output_lines(text: str) -> list[list[str]]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return [line.split() for line in lines]


def outputs_match(actual: str, expected: str, tolerance: float = TOLERANCE) -> bool:
    """A program's stdout against the expected stdout (module docstring)."""
    actual_lines, expected_lines = _output_lines(actual), _output_lines(expected)
    if len(actual_lines) != len(expected_lines):
        return False
    for got, want in zip(actual_lines, expected_lines):
        if len(got) != len(want) or not all(tokens_equal(a, e, tolerance) for a, e in zip(got, want)):
            return False
    return True


def _is_integer(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, BigInt)


def _integer_text(value: int | BigInt) -> str:
    """Decimal digits of an integer (a huge ``int`` can only come from trusted test data;
    ``str`` would refuse it, ``Decimal`` converts it)."""
    if isinstance(value, BigInt) or value.bit_length() < 13000:  # < 4000 digits
        return str(value)
    return str(Decimal(value))


def _is_number(value: Any) -> bool:
    return _is_integer(value) or isinstance(value, (float, Decimal))


def values_match(actual: Any, expected: Any, tolerance: float = TOLERANCE) -> bool:
    """A call-based result against the expected JSON value, by the expected value's type: an
    integer only by an integer, exactly; a floating-point number by a number within the
    tolerance; a bool only by a bool; containers element by element; anything else equal and
    of the same type."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if _is_integer(expected):
        return _is_integer(actual) and _integer_text(actual) == _integer_text(expected)
    if isinstance(expected, (float, Decimal)):
        return _is_number(actual) and _close_to_float(Decimal(actual), Decimal(expected), tolerance)
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(values_match(a, e, tolerance) for a, e in zip(actual, expected))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(values_match(actual[k], expected[k], tolerance) for k in actual)
    return type(actual) is type(expected) and actual == expected


@dataclass(frozen=True)
class ExpectedText:
    """A call-based expected output given as text holding a JSON value other than a string:
    a result equal to ``value``, or a returned string equal to ``text``, matches."""

    text: str
    value: Any


def _result_matches(actual: Any, expected: Any) -> bool:
    if isinstance(expected, ExpectedText):
        if isinstance(actual, str) and actual == expected.text:
            return True
        expected = expected.value
    if values_match(actual, expected):
        return True
    return isinstance(expected, list) and len(expected) == 1 and values_match(actual, expected[0])


def _json_int(text: str) -> int:
    """JSON integers of any length, as ``int`` (for the program's arguments: trusted data)."""
    return int(text) if len(text) < 4000 else int(Decimal(text))


def _loads(text: str | bytes) -> Any:
    """Test inputs (call arguments, trusted JSON passed on to the program as plain values)."""
    return json.loads(text, parse_int=_json_int)


def _nested_deeper_than(text: str, depth: int) -> bool:
    """Whether JSON ``text`` nests arrays / objects more than ``depth`` deep at the start of
    some run of ``depth`` brackets (so anything nesting more than twice ``depth`` is caught);
    linear, and at C speed but for one step per ``depth`` brackets."""
    if text.count("[") + text.count("{") <= depth:
        return False
    skeleton = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    level = 0
    for start in range(0, len(skeleton), depth):
        chunk = skeleton[start : start + depth]
        level += chunk.count("[") + chunk.count("{") - chunk.count("]") - chunk.count("}")
        if level > depth:
            return True
    return False


def load_result(data: bytes) -> Any:
    """What a program wrote to its result channel, parsed in bounded time and memory: long
    integers stay text (:class:`BigInt`), other numbers are exact (``Decimal``, so ``1e400``
    stays a finite number), and nesting is limited (:data:`MAX_JSON_DEPTH`). Raises
    ValueError for anything else (not JSON, nested too deeply)."""
    text = data.decode("utf-8", "strict")
    if _nested_deeper_than(text, MAX_JSON_DEPTH):
        raise ValueError(f"result nested more than {MAX_JSON_DEPTH} deep")
    return _parse_json(text)


def _parse_json(text: str | bytes) -> Any:
    """JSON with long integers kept as text and the other numbers exact (module docstring)."""
    return json.loads(text, parse_int=_parse_int, parse_float=Decimal)


# ----------------------------------------------------------------------------------------------
# tests


@dataclass(frozen=True)
class TestSuite:
    """Parsed tests: stdin bytes per test, expected outputs, and the function for call-based;
    or the plan of assert-style tests (:mod:`cascade_rl.rewards.code_asserts`)."""

    __test__ = False  # not a pytest test class

    inputs: tuple[bytes, ...]
    expected: tuple[Any, ...]
    fn_name: str | None
    asserts: AssertTests | None = None

    @property
    def count(self) -> int:
        return self.asserts.count if self.asserts is not None else len(self.inputs)


def _text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise ValueError(f"tests: {what} must be a string (or a list of lines), got {value!r:.80}")


def _call_arguments(value: Any, index: int) -> list:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        try:
            return [_loads(line) for line in value.split("\n") if line.strip()]
        except ValueError as error:
            raise ValueError(f"tests: input {index} is not newline-separated JSON: {error}") from None
    raise ValueError(f"tests: input {index} must be a JSON string or a list of arguments")


def _expected_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            parsed = _parse_json(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, str) else ExpectedText(value, parsed)
    return value


def parse_tests(tests: Mapping[str, Any] | str) -> TestSuite:
    """Validate ``tests`` (module docstring) and prepare each test's stdin."""
    if isinstance(tests, (str, bytes)):
        try:
            tests = json.loads(tests)
        except ValueError as error:
            raise ValueError(f"tests: not valid JSON ({error})") from None
    if not isinstance(tests, Mapping):
        raise ValueError(f"tests must be a mapping with 'inputs' and 'outputs', got {type(tests).__name__}")
    if "asserts" in tests:
        return TestSuite((), (), None, code_asserts.parse(tests))
    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise ValueError("tests: 'inputs' and 'outputs' must both be lists")
    if len(inputs) != len(outputs) or not inputs:
        raise ValueError(
            f"tests: need as many outputs as inputs and at least one test, got "
            f"{len(inputs)} inputs and {len(outputs)} outputs"
        )
    fn_name = tests.get("fn_name") or None
    if fn_name is None:
        return TestSuite(
            tuple(_text(v, f"input {i}").encode("utf-8") for i, v in enumerate(inputs)),
            tuple(_text(v, f"output {i}") for i, v in enumerate(outputs)),
            None,
        )
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise ValueError(f"tests: fn_name must be a Python identifier, got {fn_name!r}")
    stdins = tuple(json.dumps(_call_arguments(v, i)).encode() for i, v in enumerate(inputs))
    return TestSuite(stdins, tuple(_expected_value(v) for v in outputs), fn_name)


# ----------------------------------------------------------------------------------------------
# running one program


@dataclass(frozen=True)
class _Program:
    source: str
    suite: TestSuite
    limits: Limits
    stop_on_failure: bool


#: failures a program sees for itself (it crashed or exited non-zero, ran out of time or memory,
#: wrote too much): with ``stop_on_failure`` they stop its tests. A wrong answer never does: a
#: program that is run again after an answer, or not, learns whether the answer was accepted
SEEN_BY_THE_PROGRAM = frozenset({"runtime_error", "timeout", "memory", "output_limit"})


class _NoVerdict(Exception):
    """The sandbox failed a run (it could not start, died, did not answer): no verdict."""


def _failure_kind(run: RunResult) -> str | None:
    """Why a run failed before its output could be compared, or None. A failure of the
    sandbox itself (``run.error``) is no verdict on the program (:class:`_NoVerdict`)."""
    if run.error is not None:
        raise _NoVerdict(run.error)
    if run.timed_out or run.limit in ("time", "cpu"):
        return "timeout"
    if run.limit == "memory" or b"MemoryError" in run.stderr[-4096:]:
        return "memory"
    if run.limit == "output" or run.output_truncated:
        return "output_limit"
    if run.limit or run.returncode != 0:
        return "runtime_error"
    return None


def _run_test(runner: Any, program: _Program, index: int) -> RunResult:
    """The run of stdin / stdout or call-based test ``index``."""
    suite = program.suite
    options = {
        "stdin": suite.inputs[index],
        "limits": program.limits,
        "recursion_limit": RECURSION_LIMIT,
        "int_max_str_digits": 0,
    }
    if suite.fn_name is None:
        return runner.run_python(program.source, filename="solution.py", **options)
    driver = CALL_DRIVER.format(prelude=CALL_PRELUDE, source=program.source, fn_name=suite.fn_name)
    return runner.run_python(driver, filename="driver.py", result_channel=True, **options)


def _compare(suite: TestSuite, index: int, run: RunResult) -> tuple[bool, str | None]:
    """(passed, why the output could not be compared or None). Whatever the program wrote,
    this returns: an output that breaks the comparison fails the test, with the reason."""
    try:
        if suite.fn_name is None:
            return outputs_match(run.stdout.decode("utf-8", "replace"), suite.expected[index]), None
        if not run.result:
            return False, "nothing on the result channel"
        return _result_matches(load_result(run.result), suite.expected[index]), None
    except (ValueError, ArithmeticError, RecursionError, MemoryError, TypeError) as error:
        return False, f"output not comparable: {type(error).__name__}: {str(error)[:200]}"


#: what all of a program's stdin / call-based runs may write (stdout and result channel
#: together) while their outputs wait to be compared; more ends its tests (``output_limit``)
KEPT_OUTPUT_BYTES = 128 * 1024 * 1024


def _io_tests(runner: Any, program: _Program, outcomes: list[Outcome]) -> float:
    """Run stdin / stdout or call-based tests one process each, appending to ``outcomes``;
    the seconds they took. Every test runs, whatever the earlier ones gave, but for a failure
    the program saw itself with ``stop_on_failure`` (:data:`SEEN_BY_THE_PROGRAM`); outputs are
    compared only once the last run is over, so that how long a comparison takes (it ends at
    the first difference) cannot delay the next run by an amount the program could measure."""
    seconds, kept, waiting = 0.0, 0, []
    for index in range(program.suite.count):
        run = _run_test(runner, program, index)
        seconds += run.seconds
        kind, kept = _failure_kind(run), kept + len(run.stdout) + len(run.result)
        if kind is None and kept > KEPT_OUTPUT_BYTES:
            kind = "output_limit"
        outcomes.append(Outcome(kind, stderr=run.stderr_text[-STDERR_TAIL:]))
        if kind is None:  # (its stderr is not needed to compare it)
            waiting.append((index, replace(run, stderr=b"")))
        if kind in SEEN_BY_THE_PROGRAM and program.stop_on_failure:
            break
    for index, run in waiting:
        passed, problem = _compare(program.suite, index, run)
        outcomes[index] = Outcome(None) if passed else Outcome("wrong_answer", problem, stderr=outcomes[index].stderr)
    for outcome in outcomes:
        outcome.stderr = outcome.stderr if outcome.kind else ""
    return seconds


def _assert_tests(runner: Any, program: _Program, outcomes: list[Outcome]) -> float:
    """Run assert-style tests (:mod:`cascade_rl.rewards.code_asserts`), appending to
    ``outcomes``; the seconds they took. One run holds the program's process (and the
    tester's) for every test from the first not judged yet, each test with the time limit,
    and answers all of them whatever the verdicts (:class:`Judge`); a run that ends early (the
    program crashed, a limit) judges its next test by how it ended, and the tests after it get
    a run of their own (unless ``stop_on_failure``: the program saw that failure itself)."""
    plan, seconds = program.suite.asserts, 0.0
    while len(outcomes) < plan.count:
        start = len(outcomes)
        judge = Judge(plan, start)
        run = runner.run_python(
            program_source(plan, program.source),
            filename="solution.py",
            stdin=b"" if plan.in_tester else requests(plan, start),
            tester=tester_source(plan, start) if plan.in_tester else None,
            result_channel=True,
            result_lines=lines_per_statement(plan, start),
            on_line=judge.take,
            limits=program.limits,
            recursion_limit=RECURSION_LIMIT,
            int_max_str_digits=0,
        )
        seconds += run.seconds
        if judge.broken is not None:
            raise judge.broken
        kind = _failure_kind(run)  # (raises for a failure of the sandbox)
        stderr = run.stderr_text[-STDERR_TAIL:]
        for outcome in judge.finish():
            outcome.stderr = stderr if outcome.kind else ""
        ended = bool(judge.outcomes) and judge.outcomes[-1].ended
        if ended and kind in ("timeout", "memory", "output_limit"):
            judge.outcomes[-1].kind = kind  # the limit that ended the program's process
        outcomes += judge.outcomes
        if len(outcomes) == plan.count:
            break
        if not ended:  # the run stopped before the next test's line: that test failed so
            early = "no result: the program's process ended before answering" if kind is None else None
            outcomes.append(Outcome(kind or "wrong_answer", early, stderr=stderr))
        if program.stop_on_failure:  # (a run that ended before its last test: the program saw it)
            break
    return seconds


def _run_tests(runner: Any, program: _Program) -> Score:
    """Run a program's tests in one worker's sandbox; reward 1 only if every test passes.
    A failure of the sandbox (it could not start, died or did not answer) is no verdict
    (:meth:`Score.no_verdict`); tests whose own code fails score 0 with the error
    (``details["error"]``: a scoring error, counted by ``cascade score``); where isolation
    cannot be had and was not waived, the error is raised. Anything else that goes wrong with
    this program scores it 0 with the error, and the batch goes on."""
    total = program.suite.count
    outcomes: list[Outcome] = []
    failure = {"index": None, "kind": None}
    try:
        run_all = _assert_tests if program.suite.asserts is not None else _io_tests
        seconds = run_all(runner, program, outcomes)
    except IsolationUnavailable:
        raise
    except (_NoVerdict, SandboxError) as error:
        return Score.no_verdict(f"sandbox failed: {error}", passed=0, total=total, first_failure=failure)
    except Exception as error:  # noqa: BLE001 - this program scores 0, the others go on
        failure = {"index": len(outcomes), "kind": "runtime_error"}
        details = {"passed": 0, "total": total, "timeout": False, "first_failure": failure}
        message = str(error) if isinstance(error, TestsBroken) else f"{type(error).__name__}: {error}"
        return Score(0.0, {**details, "error": message})
    failed = next(((i, o) for i, o in enumerate(outcomes) if o.kind is not None), None)
    first_failure = None
    if failed is not None:
        first_failure = {"index": failed[0], "kind": failed[1].kind}
        if failed[1].problem:
            first_failure["error"] = failed[1].problem
    passed = sum(o.kind is None for o in outcomes)
    details = {
        "passed": passed,
        "total": total,
        "first_failure": first_failure,
        "results": [o.kind or "pass" for o in outcomes] + ["not_run"] * (total - len(outcomes)),
        "timeout": any(o.kind == "timeout" for o in outcomes),
        "stderr": failed[1].stderr if failed else "",
        "test_seconds": round(seconds, 6),
        "isolation": isolation(),
    }
    return Score(1.0 if passed == total else 0.0, details)


# ----------------------------------------------------------------------------------------------
# public API


def _prepare(
    response: str,
    *,
    tests: Any,
    prompt: Any = None,
    language_penalty: float = 0.0,
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    output_bytes: int = DEFAULT_OUTPUT_BYTES,
    stop_on_failure: bool = True,
    cpu_limit: str | float = "tree",
) -> Score | _Program:
    """A final Score when no test needs to run, else the program to run."""
    suite = parse_tests(tests)
    cpu_s = _cpu_seconds(cpu_limit, time_limit)
    limits = Limits(time_s=time_limit, cpu_s=cpu_s, memory_mb=memory_mb, output_bytes=output_bytes)
    total = suite.count
    split = split_thinking(response or "")
    if not split.finished:
        return _no_run(0.0, total, "no_code", unfinished=True)
    if is_mixed(response or "", prompt):
        return _no_run(float(language_penalty), total, None, language_mixed=True)
    source = extract_code(split.answer)
    if source is None:
        return _no_run(0.0, total, "no_code")
    return _Program(source, suite, limits, stop_on_failure)


def _cpu_seconds(cpu_limit: Any, time_limit: float) -> float | None:
    """CPU-seconds of a test's whole process tree (every process of the program together):
    ``"tree"`` (default) the time limit, so forking workers buys no CPU a single process would
    not get; a positive number, that many times the time limit (e.g. 4: four cores for the
    whole time); ``"off"``, None: the sandbox's default (time limit + 1 s). The wall limit
    (``time_limit``) holds in every case; the sandbox counts CPU in whole seconds, rounded up.
    ``False`` means ``"off"`` too (YAML reads an unquoted ``off`` as false)."""
    if cpu_limit == "tree":
        return float(time_limit)
    if cpu_limit == "off" or cpu_limit is False:
        return None
    if isinstance(cpu_limit, (int, float)) and not isinstance(cpu_limit, bool) and cpu_limit > 0:
        return float(cpu_limit) * float(time_limit)
    raise ValueError(f"code reward: cpu_limit must be 'tree', 'off' or a positive factor, got {cpu_limit!r}")


def _no_run(reward: float, total: int, kind: str | None, **flags: bool) -> Score:
    failure = {"index": None, "kind": kind} if kind else None
    return Score(reward, {"passed": 0, "total": total, "first_failure": failure, "timeout": False, **flags})


def score(
    response: str,
    *,
    tests: Mapping[str, Any] | str,
    prompt: Any = None,
    language_penalty: float = 0.0,
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    output_bytes: int = DEFAULT_OUTPUT_BYTES,
    stop_on_failure: bool = True,
    cpu_limit: str | float = "tree",
    pool: SandboxPool | None = None,
) -> Score:
    """Reward of one response: 1 if its program passes every test, else 0 (module docstring).

    ``details``: ``passed``, ``total``, ``first_failure`` (``index``, ``kind``: wrong_answer,
    runtime_error, timeout, memory, output_limit or no_code), ``timeout``, ``stderr`` (tail of
    the failing test's), ``language_mixed`` / ``unfinished`` when they decided the reward.
    ``time_limit`` is each test's wall time and, with ``cpu_limit="tree"`` (default), also the
    CPU time of its whole process tree (see :func:`_cpu_seconds` for the other settings).
    """
    prepared = _prepare(
        response,
        tests=tests,
        prompt=prompt,
        language_penalty=language_penalty,
        time_limit=time_limit,
        memory_mb=memory_mb,
        output_bytes=output_bytes,
        stop_on_failure=stop_on_failure,
        cpu_limit=cpu_limit,
    )
    if isinstance(prepared, Score):
        return prepared
    isolation()  # IsolationUnavailable: stop here, before any program runs
    return _score_of((pool or shared_pool()).submit_job(_run_tests, prepared))


def _score_of(future: Future) -> Score:
    """The Score of a pool job; a job that failed (its worker died) is no verdict."""
    try:
        return future.result()
    except IsolationUnavailable:
        raise
    except Exception as error:  # noqa: BLE001 - an infrastructure failure, not a wrong answer
        return Score.no_verdict(f"reward worker failed: {type(error).__name__}: {error}")


async def _awaited_score(future: Future) -> Score:
    """:func:`_score_of` for asyncio."""
    try:
        return await asyncio.wrap_future(future)
    except IsolationUnavailable:
        raise
    except Exception as error:  # noqa: BLE001 - an infrastructure failure, not a wrong answer
        return Score.no_verdict(f"reward worker failed: {type(error).__name__}: {error}")


def _submit(request: Mapping[str, Any], options: Mapping[str, Any], pool: SandboxPool) -> Future:
    """A future Score for one request; bad requests score 0 with the error in the details."""
    try:
        prepared = _prepare(
            request.get("response") or "", tests=request.get("tests"), prompt=request.get("prompt"), **options
        )
    except (ValueError, TypeError) as error:
        prepared = Score(0.0, {"error": f"{type(error).__name__}: {error}"})
    if isinstance(prepared, Score):
        done: Future = Future()
        done.set_result(prepared)
        return done
    return pool.submit_job(_run_tests, prepared)


def _checked_options(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise TypeError(f"code reward: unknown option(s) {', '.join(unknown)}; known: {', '.join(OPTION_NAMES)}")
    return dict(options)


def score_batch(
    requests: Sequence[Mapping[str, Any]],
    *,
    workers: int | None = None,
    pool: SandboxPool | None = None,
    **options: Any,
) -> list[Score]:
    """Score many ``{"response", "prompt", "tests"}`` requests concurrently, in order.

    Runs on ``pool``, else on the process-wide pool of ``workers`` sandboxes (``cascade score
    --workers``, the recipe's ``reward_workers``; default ``os.cpu_count()``). ``options``
    are those of :func:`score`. Whatever one program does, it is scored on its own: the call
    returns a Score for every request (:meth:`Score.no_verdict` where the sandbox failed). Where
    untrusted code cannot be isolated and nobody opted into rlimits only, raises
    :class:`~cascade_rl.sandbox.IsolationUnavailable` before any program runs.
    """
    options = _checked_options(options)
    isolation()
    active = pool or shared_pool(workers or None)
    return [_score_of(future) for future in [_submit(r, options, active) for r in requests]]


async def score_many(
    requests: Sequence[Mapping[str, Any]],
    *,
    workers: int | None = None,
    pool: SandboxPool | None = None,
    **options: Any,
) -> list[Score]:
    """:func:`score_batch` for asyncio: awaits the pool's futures, so rewards are computed while
    the event loop goes on (e.g. generating the next batch)."""
    options = _checked_options(options)
    isolation()
    active = pool or shared_pool(workers or None)
    futures = [_submit(request, options, active) for request in requests]
    return list(await asyncio.gather(*(_awaited_score(f) for f in futures)))
