"""Assert-style code tests (MBPP, HumanEval: ``{"asserts", "setup", "prelude"}``) on the host:
how each statement is judged without trusting the program's process (SPEC section 6; issue 24).

**Why one file of about 750 lines** (DESIGN.md: files over ~500 lines say why): it is one
definition, what a statement's verdict may rest on: the threat model below, which names come
from the program, which statements are lifted and how (the :class:`Lifted` plan), and how the
lines that come back are judged against that same plan; the programs that run in the sandbox
are :mod:`cascade_rl.rewards.code_harness`.

**Threat model.** The program is written to pass, not to solve: it may patch anything in its
own process (builtins, modules, ``sys.settrace``, frames, ``gc``, threads, ``atexit``, signal
handlers, its file descriptors, /proc/self) and it may lie with its values (``__eq__`` always
true, ``int`` / ``float`` / ``str`` subclasses). None of that may reach the verdict, so the
program's process never decides one and never holds the tests:

1. **Lifted statements**, compared here. ``assert CALL OP VALUE`` (any comparison, either
   order), ``assert CALL`` and ``assert not CALL``, where ``VALUE`` is a constant this module
   evaluates itself (a literal, arithmetic on numbers, ``set()``, ``float('inf')``, ...) and
   ``CALL`` is a call of a name the program defines (or of a method of an object it made:
   ``Solution().two_sum([2, 7], 9)``), possibly wrapped in one built-in of one argument
   (``int(...)``, ``sorted(...)``, ``round(..., 2)``). Only ``CALL`` goes to the
   program, as source text; it is evaluated there and its result comes back as a plain value
   (:mod:`cascade_rl.rewards.code_harness`: exact built-in types, rebuilt by type, so a
   subclass's ``__eq__`` stays behind), then ``value OP VALUE`` is computed here on those
   types, with Python's own semantics (``(4, 5) != [4, 5]``, ``1 == 1.0``, NaN equals
   nothing). The program sees the arguments (as any function does), never ``VALUE``. Its
   arguments may use constants, displays, operators, built-in names and the program's own
   names (``max_chain_length([Pair(5, 24)], 1)``, MBPP's trees built by ``setup`` from the
   program's ``Node``); anything that calls trusted code to make an input (a prompt helper
   such as ``encode(...)``, a library) is not lifted, since the program could replace it.
   HumanEval's ``check(entry_point)`` is lifted call by call when the ``check`` the setup
   defines is only such asserts on its parameter (``assert candidate([1]) == [1]``; 154 of the
   164 rows), ``candidate`` then read as the entry point; the statement passes when every call
   does, and fails at the first that does not, as ``check`` would. All of MBPP is lifted.
2. **Every other statement** (loops, helpers, tolerance checks: HumanEval's ``check``) runs in
   a *tester*, a second sandboxed process with trusted code only: the prompt's code (its
   helper functions are the prompt's, whatever the program defines), the setup and the
   statement, in a namespace where each name the tests take from the program is a stand-in
   that sends plain arguments to the program over a socket and returns the plain value it
   answers. The tester reports each statement's verdict on the result channel, which the
   program cannot reach: the tester is never dumpable (no /proc access to its memory or file
   descriptors), ptrace and process_vm_readv are refused by the seccomp filter, and the
   program's own result channel is the socket, whose lines the tester reads as replies only.
3. **Named errors** (``ValueError`` from :func:`parse`, so a converter counts the row and a
   score carries ``details["error"]``): a statement that uses nothing the program defines (it
   would pass for any program), and a statement that cannot be lifted although the setup
   builds objects from the program's classes (the tester cannot hold them). The tester also
   reports the tests' own code failing (the prompt's code or the setup raising for any
   program, a test passing the program something not plain) as ``broken``: an error, never a
   pass.

What stays in the program's process, and why it cannot matter: the prompt's code and the
program (the program's definitions replace the prompt's stubs; a prompt whose own code fails
there fails every program, as a ``runtime_error`` whose traceback names ``prompt.py``: that
process cannot be trusted to call a row broken), the setup when it builds objects from the
program's own classes (MBPP shows it in the prompt), and the evaluation of ``CALL``: whatever
the program does there only chooses the plain value it answers, which it could have returned
anyway. Nothing there means "passed" (there is no token); the expected
values exist only here and in the tester's memory. Reading the program's stdin gives nothing:
the requests are read before the program starts, from a pipe (not rewindable), and hold only
the calls. A program that writes lines to its result channel itself only answers the calls
with values of its choice. The tester's stand-ins accept only plain values; an exception the
program raised comes back as an instance of its nearest built-in class, and only an ordinary
error (``except ValueError`` in a test works, for the program's ``class Bad(ValueError)`` too,
not for its own class named ``ValueError``); StopIteration and StopAsyncIteration, which would
end the tests' own ``map``, ``zip`` and loops as if every case had passed, come back as an
ordinary error, and the program's process ending in a call (or raising SystemExit,
KeyboardInterrupt, GeneratorExit) is never an ``Exception`` a test can swallow.

**No verdict the program can observe** (issue 40). A program that could tell whether an answer
was accepted (it was stopped, or not asked again, only after a wrong one) could hand that to
the next rollout of the same prompt, which would answer from memory. So the judging never
changes what the program sees: a lifted run answers every call it was sent (all of them are
read before the program starts) and is stopped only when its process ends; the tester runs
every statement whatever the earlier ones gave, its assertions (``assert``, ``raise
AssertionError``) are recorded instead of raised, so a ``check`` makes every call it would
make had they passed, and ``all`` / ``any`` read every item. Still visible to a program, by
design of the tests' own code: a call the code makes only after an answer compared a certain
way (an ``if`` or ``or`` on the result, an exception it catches) and the time the tester takes.
Without bubblewrap, everything the sandbox does not isolate (see :mod:`cascade_rl.sandbox`)
is exposed.

**Which names come from the program.** The names a statement reads that its row does not
bind: not set by the setup, not built-ins, not standard-library modules used as modules
(``math.isclose``: the tester imports them), and not defined by the prompt's code except as a
stub (a function whose body is only docstrings, ``pass``, ``...`` or imports: HumanEval's entry
point; a class of such functions: LeetCode's ``Solution``). A statement that reads no such
name but calls a built-in (MBPP 126's ``sum(10, 15)``) takes that name from the program (the
innermost such call: in ``abs(sum(1, 2) - 3) < 1``, ``sum``), for that statement only (the
setup's code keeps the built-in). The tester gets stand-ins for the names of all statements
and those the setup reads. The setup runs in the program's process when its top level uses
names that only the program defines (MBPP's ``root = Node(1)``), else in the tester only.
"""

from __future__ import annotations

import ast
import builtins
import json
import marshal
import operator
import reprlib
import symtable
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cascade_rl.rewards import code_harness

BUILTIN_NAMES = frozenset(dir(builtins))
MODULE_NAMES = frozenset(sys.stdlib_module_names)
#: comparisons of a lifted statement (``value OP expected``); ``contains`` is ``VALUE in CALL``
COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda value, expected: value in expected,
    ast.NotIn: lambda value, expected: value not in expected,
}
#: the comparison with its operands swapped (``VALUE OP CALL``)
SWAPPED = {
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
    ast.Lt: ast.Gt,
    ast.LtE: ast.GtE,
    ast.Gt: ast.Lt,
    ast.GtE: ast.LtE,
    ast.Is: ast.Is,
    ast.IsNot: ast.IsNot,
}
#: containers an expected value may be built with from a literal (``set()``, ``set([1, 2])``)
CONSTRUCTORS = {"set": set, "frozenset": frozenset, "tuple": tuple, "list": list, "dict": dict}
MISSING = object()
_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlong = 80, 80, 80


@dataclass(frozen=True)
class Lifted:
    """A statement judged here: ``expression`` (the program's side) is evaluated in the
    program's namespace, ``compare(value, expected)`` decides (``truth``: ``bool(value)``)."""

    expression: str
    needs: tuple[str, ...]
    compare: str
    expected: Any = None
    #: the assert it comes from, for reports
    source: str = ""
    #: names the expression reads as one of the program's (an inlined ``check``'s parameter
    #: ``candidate`` as the entry point): (name, the program's name) pairs
    aliases: tuple[tuple[str, str], ...] = ()

    def passes(self, value: Any) -> bool:
        if self.compare in ("truth", "not"):
            return bool(value) is (self.compare == "truth")
        if self.compare == "contains":
            return self.expected in value
        if self.compare == "not contains":
            return self.expected not in value
        return bool(COMPARE[getattr(ast, self.compare)](value, self.expected))


@dataclass(frozen=True)
class AssertTests:
    """The plan of a row's assert-style tests (module docstring)."""

    statements: tuple[str, ...]
    prelude: str
    setup: str
    #: the setup builds objects from the program's classes: it runs in the program's process
    setup_in_program: bool
    #: per statement, the lifted calls that judge it here (one; or those of an inlined
    #: ``check``, all of which must pass), or None: it runs in the tester
    lifted: tuple[tuple[Lifted, ...] | None, ...]
    #: names the tests take from the program (the tester's stand-ins)
    names: tuple[str, ...]
    #: per statement, built-in names it alone takes from the program (MBPP 126's ``sum``): the
    #: tester binds them for that statement only, so the setup's code keeps the built-in
    shadows: tuple[tuple[str, ...], ...]
    #: standard-library modules the tests use without importing them (the tester imports them)
    modules: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.statements)

    @property
    def in_tester(self) -> bool:
        """Whether the tests run in a tester (any statement is not lifted)."""
        return not all(self.lifted)


# ----------------------------------------------------------------------------------------------
# names


def _reads(source: str) -> tuple[set[str], set[str]]:
    """(names the code reads from its module's globals, names it binds at module level)."""
    table = symtable.symtable(source, "tests", "exec")
    reads, bound = set(), set()
    for symbol in table.get_symbols():
        if symbol.is_referenced():
            reads.add(symbol.get_name())
        if symbol.is_assigned() or symbol.is_imported():
            bound.add(symbol.get_name())
    stack = list(table.get_children())
    while stack:
        child = stack.pop()
        stack.extend(child.get_children())
        for symbol in child.get_symbols():
            if symbol.is_global() and symbol.is_referenced():
                reads.add(symbol.get_name())
    return reads, bound


def _read_at_once(tree: ast.AST) -> set[str]:
    """Names read when the code runs, not only when a function defined in it is called."""
    names: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d])
            continue
        if isinstance(node, ast.Lambda):
            stack.extend(node.args.defaults + [d for d in node.args.kw_defaults if d])
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _called(tree: ast.AST, innermost: bool = False) -> set[str]:
    """Names called in ``tree`` (``innermost``: only in calls whose arguments call nothing)."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    if innermost:
        calls = [c for c in calls if not any(isinstance(n, ast.Call) for a in c.args for n in ast.walk(a))]
    return {call.func.id for call in calls}


def _stubs(tree: ast.Module) -> set[str]:
    """Functions of the prompt's code that compute nothing yet: a body of docstrings, ``pass``,
    ``...`` and imports only (HumanEval/115's ``max_fill`` imports ``math`` before its
    docstring); and classes whose body is only that and such functions (LeetCode's
    ``class Solution``)."""

    def idle(statement: ast.stmt) -> bool:
        constant = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        return constant or isinstance(statement, (ast.Pass, ast.Import, ast.ImportFrom))

    def stub(node: ast.stmt) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return all(map(idle, node.body))
        return isinstance(node, ast.ClassDef) and all(idle(s) or stub(s) for s in node.body)

    return {node.name for node in tree.body if stub(node)}


@dataclass(frozen=True)
class _Row:
    """What the prompt's code and the setup bind, for telling the program's names apart."""

    prelude_bound: frozenset[str]
    stubs: frozenset[str]
    setup_bound: frozenset[str]

    def from_program(self, name: str, called: bool) -> bool:
        """Whether ``name``, read by a test, comes from the program (module docstring)."""
        if name.startswith("__") and name.endswith("__"):
            return False
        if name in self.setup_bound or (name in self.prelude_bound and name not in self.stubs):
            return False
        if name in self.stubs:
            return True
        return name not in BUILTIN_NAMES and (called or name not in MODULE_NAMES)


# ----------------------------------------------------------------------------------------------
# lifting


#: arithmetic an expected value may be written with (``(3 + 5 + 7, 3 * 5 * 7)``), on numbers
ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
#: the largest number arithmetic on expected values starts from or makes (bounded time and memory)
ARITHMETIC_LIMIT = 10**100


def _number(value: Any) -> bool:
    number = type(value) in (int, float, complex)
    return number and (not isinstance(value, int) or abs(value) <= ARITHMETIC_LIMIT)


def _constant(node: ast.expr) -> Any:
    """The value of an expected side evaluated here, or MISSING: a literal; displays of
    constants; arithmetic on numbers of at most 100 digits (``2 ** 10``, ``6.0 / 5.0``); a
    container built from a constant (``set()``, ``frozenset({1})``); ``float('inf')``."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and not any(isinstance(e, ast.Starred) for e in node.elts):
        items = [_constant(e) for e in node.elts]
        kind = {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)]
        return MISSING if MISSING in items else _built(kind, items)
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        left, right = _constant(node.left), _constant(node.right)
        if not (_number(left) and _number(right)) or (isinstance(node.op, ast.Pow) and abs(right) > 64):
            return MISSING
        try:
            value = ARITHMETIC[type(node.op)](left, right)
        except (ArithmeticError, ValueError, TypeError):
            return MISSING
        return value if _number(value) else MISSING
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _constant(node.operand)
        return (-operand if isinstance(node.op, ast.USub) else operand) if _number(operand) else MISSING
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords and len(node.args) <= 1:
        argument = _constant(node.args[0]) if node.args else ()
        if argument is MISSING:
            return MISSING
        if node.func.id in CONSTRUCTORS and isinstance(argument, (tuple, list, set, frozenset, dict, str)):
            return _built(CONSTRUCTORS[node.func.id], argument)
        if node.func.id == "float" and isinstance(argument, str):
            try:
                return float(argument)
            except ValueError:
                return MISSING
    return MISSING


def _built(kind: type, items: Any) -> Any:
    try:
        return kind(items)
    except (TypeError, ValueError):  # an unhashable element of a set, a dict of non-pairs
        return MISSING


class _Lifter:
    """Decides whether one statement is lifted (module docstring, point 1)."""

    def __init__(
        self, facing: set[str], program_setup: frozenset[str], row: _Row, aliases: Mapping[str, str] | None = None
    ) -> None:
        self.facing, self.program_setup, self.row = facing | set(aliases or ()), program_setup, row
        self.aliases = dict(aliases or {})

    def _input(self, node: ast.expr, needs: set[str]) -> bool:
        """Whether an argument can be evaluated in the program's process (adds the program's
        names it uses to ``needs``): nothing in it calls trusted code."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return all(not isinstance(e, ast.Starred) and self._input(e, needs) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(k is not None and self._input(k, needs) for k in node.keys) and all(
                self._input(v, needs) for v in node.values
            )
        if isinstance(node, ast.UnaryOp):
            return self._input(node.operand, needs)
        if isinstance(node, ast.BinOp):
            return self._input(node.left, needs) and self._input(node.right, needs)
        if isinstance(node, ast.Attribute):  # box.items: the program's own object
            return self._input(node.value, needs)
        if isinstance(node, ast.Subscript):
            return self._input(node.value, needs) and self._input(node.slice, needs)
        if isinstance(node, ast.Name):
            if node.id in self.facing:
                needs.add(node.id)
                return True
            trusted = node.id in self.row.setup_bound or node.id in self.row.prelude_bound
            return node.id in self.program_setup or (node.id in BUILTIN_NAMES and not trusted)
        if isinstance(node, ast.Call):
            return self._call(node, needs)
        return False

    def _call(self, node: ast.expr, needs: set[str]) -> bool:
        """A call of one of the program's names, or of a method of an object the program made
        (``Solution().two_sum(...)``), with arguments it may evaluate."""
        if not isinstance(node, ast.Call):
            return False
        function = node.func
        if isinstance(function, ast.Attribute) and self._call(function.value, needs):
            pass
        elif not (isinstance(function, ast.Name) and function.id in self.facing):
            return False
        arguments = [a for a in node.args] + [k.value for k in node.keywords]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return False
        if all(self._input(a, needs) for a in arguments):
            if isinstance(function, ast.Name):
                needs.add(function.id)
            return True
        return False

    def program_side(self, node: ast.expr) -> tuple[str, ...] | None:
        """The program's names a lifted ``CALL`` needs, or None when ``node`` is not one."""
        needs: set[str] = set()
        if self._call(node, needs):
            return tuple(sorted(needs))
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords):
            return None
        name = node.func.id
        if name not in BUILTIN_NAMES or name in self.facing or name in self.row.setup_bound | self.row.prelude_bound:
            return None
        digits = node.args[1:] == [] or (
            name == "round"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Constant)
            and type(node.args[1].value) is int
        )
        return self.program_side(node.args[0]) if node.args and digits else None

    def _lifted(self, side: ast.expr, needs: tuple[str, ...], compare: str, expected: Any, test: ast.expr) -> Lifted:
        aliases = tuple((name, self.aliases[name]) for name in needs if name in self.aliases)
        needs = tuple(sorted({self.aliases.get(name, name) for name in needs}))
        report = f"assert {self.source.segment(test)}"
        return Lifted(self.source.segment(side), needs, compare, expected, report, aliases)

    def lift(self, tree: ast.Module, source: _Source) -> Lifted | None:
        """The statement ``tree`` (from ``source``) as a lifted call, or None."""
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
            return None
        self.source, test = source, tree.body[0].test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, right, kind = test.left, test.comparators[0], type(test.ops[0])
            for side, other, operation in ((left, right, kind), (right, left, SWAPPED.get(kind))):
                needs = self.program_side(side)
                expected = _constant(other) if needs is not None else MISSING
                if expected is MISSING:
                    continue
                if operation is None:  # VALUE in CALL
                    operation = "contains" if kind is ast.In else "not contains"
                else:
                    operation = operation.__name__
                if operation in ("Is", "IsNot") and not (expected is None or isinstance(expected, bool)):
                    return None
                return self._lifted(side, needs, operation, expected, test)
            return None
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        side = test.operand if negated else test
        needs = self.program_side(side)
        return None if needs is None else self._lifted(side, needs, "not" if negated else "truth", None, test)


def _inline_check(tree: ast.Module, setup: _Source, facing: set[str], lifter: _Lifter) -> tuple[Lifted, ...] | None:
    """HumanEval's ``check(entry_point)`` as lifted calls, when the setup defines ``check`` once,
    with one parameter, and its body is only statements that lift with that parameter read as
    the entry point (``assert candidate(1) == 2``), docstrings and ``assert True, "..."``."""
    if not (len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Call)):
        return None
    call = tree.body[0].value
    if not (isinstance(call.func, ast.Name) and len(call.args) == 1 and not call.keywords):
        return None
    entry = call.args[0]
    if not (isinstance(entry, ast.Name) and entry.id in facing):
        return None
    bound = [n for n in setup.tree.body if call.func.id in _top_level_names(n)]
    if len(bound) != 1 or not isinstance(bound[0], ast.FunctionDef) or bound[0].decorator_list:
        return None
    arguments = bound[0].args
    if len(arguments.args) != 1 or arguments.defaults or arguments.vararg or arguments.kwarg:
        return None
    if arguments.kwonlyargs or arguments.posonlyargs:
        return None
    inner = _Lifter(facing, lifter.program_setup, lifter.row, {arguments.args[0].arg: entry.id})
    lifted = []
    for statement in bound[0].body:
        if isinstance(statement, ast.Assert) and isinstance(statement.test, ast.Constant):
            if statement.test.value:
                continue  # assert True, "..."
            return None
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring
        one = inner.lift(ast.Module(body=[statement], type_ignores=[]), setup)
        if one is None:
            return None
        lifted.append(one)
    return tuple(lifted) if lifted else None


def _top_level_names(node: ast.stmt) -> set[str]:
    """Names a top-level statement of the setup binds (``def``, ``class``, assignments,
    imports, and anything bound inside a compound statement)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


class _Source:
    """Python code of the tests, parsed once: its tree, and the text of any of its nodes."""

    def __init__(self, text: Any, what: str) -> None:
        if not isinstance(text, str):
            raise ValueError(f"tests: {what} must be Python code (a string), got {text!r:.80}")
        try:
            with warnings.catch_warnings():  # e.g. invalid escape sequences in the tests' strings
                warnings.simplefilter("ignore")
                self.tree = ast.parse(text)
                self.reads, self.bound = _reads(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            raise ValueError(f"tests: {what} is not valid Python ({type(error).__name__}: {error})") from None
        self.text, self._lines = text, None

    def segment(self, node: ast.expr) -> str:
        """The source text of ``node`` (its offsets count UTF-8 bytes)."""
        if self._lines is None:
            self._lines = [line.encode() for line in self.text.splitlines(keepends=True)]
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return self._lines[first][node.col_offset : node.end_col_offset].decode()
        middle = b"".join(self._lines[first + 1 : last])
        return (self._lines[first][node.col_offset :] + middle + self._lines[last][: node.end_col_offset]).decode()


# ----------------------------------------------------------------------------------------------
# parsing a row


def parse(tests: Mapping[str, Any]) -> AssertTests:
    """Plan a row's assert-style tests (module docstring); ValueError naming the statement
    for one that cannot be run without trusting the program. The plans of the last
    :data:`PLANS_KEPT` rows are kept: a prompt's rollouts (and samples) share one."""
    try:
        key = json.dumps(tests, sort_keys=True)
    except (TypeError, ValueError):  # not JSON data: planned every time
        return _plan(tests)
    return _kept_plan(key)


#: how many rows' plans :func:`parse` keeps
PLANS_KEPT = 1024


@lru_cache(maxsize=PLANS_KEPT)
def _kept_plan(key: str) -> AssertTests:
    return _plan(json.loads(key))


def _plan(tests: Mapping[str, Any]) -> AssertTests:
    asserts = tests.get("asserts")
    if not isinstance(asserts, list) or not asserts:
        raise ValueError("tests: 'asserts' must be a non-empty list of Python statements")
    if "inputs" in tests or "outputs" in tests:
        raise ValueError("tests: give either 'asserts' or 'inputs' and 'outputs', not both")
    sources = [_Source(code, f"assert {i}") for i, code in enumerate(asserts)]
    prelude, setup = _Source(tests.get("prelude") or "", "prelude"), _Source(tests.get("setup") or "", "setup")
    row = _Row(frozenset(prelude.bound), frozenset(_stubs(prelude.tree)), frozenset(setup.bound))
    setup_called = _called(setup.tree) if setup.reads & MODULE_NAMES else set()  # (a module is not called)
    only_program = {n for n in setup.reads if row.from_program(n, n in setup_called) and n not in row.stubs}
    setup_in_program = bool(only_program and only_program & _read_at_once(setup.tree))
    program_setup = frozenset(setup.bound) if setup_in_program else frozenset()
    names = {n for n in setup.reads if row.from_program(n, n in setup_called)}
    modules = {n for n in setup.reads - setup.bound if n in MODULE_NAMES and n not in names}
    lifted, shadows = [], []
    for index, source in enumerate(sources):
        tree, statement = source.tree, source.text
        reads = source.reads - source.bound
        called = _called(tree)
        facing = {n for n in reads if row.from_program(n, n in called)}
        shadow = set()
        if not facing and not reads & setup.bound:
            facing = shadow = {n for n in _called(tree, innermost=True) & reads if n in BUILTIN_NAMES}
        if not facing and not reads & setup.bound:
            raise ValueError(f"tests: assert {index} ({statement.strip()[:80]!r}) uses nothing the program defines")
        lifter = _Lifter(facing, program_setup, row)
        single = lifter.lift(tree, source)
        one = (single,) if single is not None else _inline_check(tree, setup, facing, lifter)
        if one is None and setup_in_program:
            raise ValueError(
                f"tests: assert {index} ({statement.strip()[:80]!r}) is not a lifted call, and the setup builds "
                f"objects from the program's names ({', '.join(sorted(only_program))}) that only the program's "
                "process can hold"
            )
        lifted.append(one)
        shadows.append(tuple(sorted(shadow)))
        names |= facing - shadow
        modules |= {n for n in reads - facing if n in MODULE_NAMES and n not in setup.bound | row.prelude_bound}
    return AssertTests(
        tuple(source.text for source in sources),
        prelude.text,
        setup.text,
        setup_in_program,
        tuple(lifted),
        tuple(sorted(names)),
        tuple(shadows),
        tuple(sorted(modules - names)),
    )


# ----------------------------------------------------------------------------------------------
# running and judging


#: where the tester's part of :mod:`~cascade_rl.rewards.code_harness` begins
TESTER_PART = f"\n# {'-' * 94}\n# the tester's side\n"


@lru_cache(maxsize=2)
def harness(tester: bool) -> str:
    """Source that defines :mod:`~cascade_rl.rewards.code_harness` in the sandbox, compiled once
    here (docstrings left out) and marshalled (the sandbox runs this very interpreter); the
    program's process gets the file up to the tester's part only."""
    text = Path(code_harness.__file__).read_text(encoding="utf-8")
    if not tester:
        text = text[: text.index(TESTER_PART)]
    code = compile(text, "harness.py", "exec", dont_inherit=True, optimize=2)
    return f"import marshal\nexec(marshal.loads(bytes.fromhex({marshal.dumps(code).hex()!r})))\n"


def program_source(plan: AssertTests, program: str) -> str:
    """The program's process: the harness, then :func:`code_harness.serve` on ``program``."""
    config = {
        "program": program,
        "prelude": plan.prelude,
        "setup": plan.setup if plan.setup_in_program else "",
        "upfront": not plan.in_tester,
    }
    return f"{harness(False)}serve({config!r})\n"


def tester_source(plan: AssertTests, start: int) -> str:
    """The tester's process: the harness, then :func:`code_harness.test` on the statements (all
    of them, whatever the earlier ones gave: see :class:`Judge`)."""
    config = {
        "prelude": plan.prelude,
        "setup": plan.setup,
        "statements": list(plan.statements),
        "names": list(plan.names),
        "shadows": [list(names) for names in plan.shadows],
        "modules": list(plan.modules),
        "start": start,
    }
    return f"{harness(True)}test({config!r})\n"


def requests(plan: AssertTests, start: int) -> bytes:
    """The lifted calls from statement ``start`` on, the program's stdin (one JSON line each)."""
    calls = [one for lifted in plan.lifted[start:] for one in lifted or ()]
    lines = ({"eval": one.expression, "needs": list(one.needs), "aliases": dict(one.aliases)} for one in calls)
    return b"".join(code_harness.dumps(line) for line in lines)


def lines_per_statement(plan: AssertTests, start: int) -> list[int]:
    """How many result lines each statement from ``start`` on gives (its lifted calls; in a
    tester's run, the tester's one report): the steps of the run, each within the time limit."""
    if plan.in_tester:
        return [1] * (plan.count - start)
    return [len(lifted) for lifted in plan.lifted[start:]]


@dataclass
class Outcome:
    """How one test ended: ``kind`` None (passed) or the failure kind, ``problem`` what went
    wrong beyond the kind, ``ended`` whether the program's process ended in it."""

    kind: str | None
    problem: str | None = None
    ended: bool = False
    stderr: str = ""


class TestsBroken(ValueError):
    """The tests' own code fails in the tester, whatever the program: a named error."""

    __test__ = False  # not a pytest test class


def judge_reply(lifted: Lifted, line: bytes) -> Outcome:
    """A lifted call's outcome from the program's reply line."""
    try:
        reply = code_harness.parse_json(line)
        if not code_harness.is_reply(reply):
            raise ValueError("not a reply")
        if "value" in reply:
            value = code_harness.decode(reply["value"])
        elif "missing" in reply:
            return Outcome("runtime_error", f"the program does not define {reply['missing']}")
        elif "unsent" in reply:
            return Outcome("wrong_answer", f"{lifted.source[:200]}: got {reply['unsent']}, which is not plain data")
        else:
            raised = str(reply["raised"])
            kind = "memory" if raised == "MemoryError" else "runtime_error"
            return Outcome(kind, f"{raised}: {str(reply.get('message'))[:300]}")
    except (ValueError, TypeError, AttributeError, RecursionError, MemoryError) as error:
        return Outcome("wrong_answer", f"the result could not be read: {type(error).__name__}: {str(error)[:200]}")
    try:
        passed = lifted.passes(value)
    except Exception as error:  # noqa: BLE001 - e.g. ordering a str against an int, as the assert would
        return Outcome("runtime_error", f"{lifted.source[:200]}: {type(error).__name__}: {str(error)[:200]}")
    return Outcome(None) if passed else Outcome("wrong_answer", f"{lifted.source[:200]}: got {_short.repr(value)}")


def judge_report(line: bytes) -> Outcome:
    """A statement's outcome from the tester's report line (TestsBroken for ``broken``)."""
    try:
        report = code_harness.parse_json(line)
        if type(report) is not dict:
            raise ValueError("not a report")
    except ValueError as error:
        return Outcome("runtime_error", f"the tester's report could not be read: {error}")
    if "broken" in report:
        raise TestsBroken(f"tests: {report['broken']}")
    kind = report.get("kind")
    return Outcome(
        kind if kind in (None, "wrong_answer", "runtime_error", "memory") else "runtime_error",
        report.get("error"),
        bool(report.get("ended")),
    )


class Judge:
    """Follows one run's result lines from statement ``start`` on (``on_line`` of
    ``run_python``): the statements' outcomes (a statement of several lifted calls passes when
    all of them do, and fails with the first that does not), and whether to stop the run: only
    when the program's process ended. A wrong answer never stops it (the program would see that
    it is not asked the next call, or is killed, only after a wrong answer: it could tell which
    answers were accepted); every call it was sent is answered. A lifted run's replies are only
    kept while it runs and judged when it is over (:meth:`finish`): how long a comparison takes
    (it ends at the first difference) cannot slow the reading of the program's next reply."""

    def __init__(self, plan: AssertTests, start: int) -> None:
        self.plan, self.start = plan, start
        self.outcomes: list[Outcome] = []
        self.broken: TestsBroken | None = None
        self._owners = [
            (index, position)
            for index, count in enumerate(lines_per_statement(plan, start), start)
            for position in range(count)
        ]
        self._replies: list[bytes] = []
        self._seen = 0

    def take(self, line: bytes) -> bool:
        if self._seen >= len(self._owners):
            return True
        self._seen += 1
        if not self.plan.in_tester:
            self._replies.append(line)
            return False
        try:
            outcome = judge_report(line)
        except TestsBroken as error:
            self.broken = error
            return True
        self.outcomes.append(outcome)
        return outcome.ended

    def finish(self) -> list[Outcome]:
        """The outcomes of the run's statements (a lifted run's replies judged now)."""
        for (index, position), line in zip(self._owners, self._replies):
            if len(self.outcomes) > index - self.start:  # the statement failed at an earlier call
                continue
            outcome = judge_reply(self.plan.lifted[index][position], line)
            if outcome.kind is not None or position == len(self.plan.lifted[index]) - 1:
                self.outcomes.append(outcome)
        self._replies = []
        return self.outcomes
