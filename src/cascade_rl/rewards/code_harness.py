"""Assert-style code tests inside the sandbox: the program's side, the tester's side, and the
plain values that pass between them (SPEC section 6; the threat model is in
:mod:`cascade_rl.rewards.code_asserts`).

Standard library only and self-contained: the code reward compiles this file once and sends
it into the sandbox (which cannot import the project) as a marshalled code object (the sandbox
runs the host's own interpreter; compiling its lines in every run would cost more than many
runs), followed by one call: :func:`serve` in the program's process, which gets the file up to
the tester's side only, or :func:`test` in the tester's (``SandboxServer.run_python(tester=
...)``); the host imports it to read what comes out (:func:`loads`). That is why it is one file
of about 570 lines (DESIGN.md: files over ~500 lines say why): what crosses between the two
sides and both sides' code are sent as one compiled unit.

**Plain values** are the only thing that leaves the program's process: ``None``, ``bool``,
``int`` (at most :data:`INT_DIGITS` digits), ``float``, ``complex``, ``str``, ``bytes``,
``bytearray``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``, and the built-in types
themselves (``remove_datatype(xs, int)``). One value is one JSON document: JSON's own types
for ``None``, ``bool``, ``int``, ``float`` (``NaN`` and ``Infinity`` included), ``str`` and
``list``; a one-key object for the others (``{"tuple": [...]}``, ``{"dict": [[key, value],
...]}``, ``{"bytes": "hex"}``, ``{"type": "int"}``, ...). :func:`encode` turns an instance of
a subclass of a plain type (a ``namedtuple``, a ``Counter``, an ``IntEnum``, or a class
written to lie) into the value of its base type, read through the base type's own methods, so
whatever the subclass overrides (``__eq__``, ``__sub__``, ``__iter__`` of a ``str``...) stays
behind; an ``__index__`` object (a NumPy integer) becomes its ``int``; anything else is not
plain (:class:`NotPlain`). :func:`decode` is strict: it builds exactly these built-in types
and refuses anything else, nesting deeper than :data:`MAX_DEPTH`, integers longer than
:data:`INT_DIGITS` digits (``int()`` of a long string is slow) and sets or dicts whose
elements share hashes more than :data:`MAX_SAME_HASH` at a time (a hash flood would make
building them quadratic), so reading whatever a program wrote takes time linear in its size.

**The program's side** (:func:`serve`): runs the prompt's code (``prelude``), the program and,
when the tests build their inputs from the program's own classes, the ``setup``, in one
namespace; then answers requests, one JSON line each, with one line each on fd 3: ``{"value":
plain}``, ``{"raised": "ValueError", "message": ...}`` (the nearest built-in class of what it
raised: :func:`builtin_ancestor`), ``{"missing": name}`` (the program
does not define it) or ``{"unsent": why}`` (the result is not plain). A request is either
``{"eval": expression, "needs": [names], "aliases": {name: name}}`` (a lifted test: the
call side of ``assert CALL == VALUE``, with an inlined ``check``'s ``candidate`` read as the
entry point; all requests are read from stdin before the program starts, so the program then
reads an empty stdin) or ``{"call": name, "args": [plain], "kwargs": {name: plain}}`` from
the tester, over the socket on fd 3.

**The tester's side** (:func:`test`): a process of its own, running trusted code only: the
prompt's code, then :class:`ProgramFunction` stand-ins for the names the tests take from the
program, then the ``setup`` (HumanEval's ``check``) and every statement, whatever the earlier
ones gave. A stand-in's call sends plain arguments to the program and returns the plain value
it answered, or raises what it reported as an ordinary error (:func:`_rebuilt_exception`). The
setup's and statements' assertions are recorded instead of raised (:class:`RecordedAssertions`,
:class:`Verdict`) and ``all`` / ``any`` read every item, so that the calls the program gets do
not depend on whether its answers were right (issue 40; the threat model is in
:mod:`cascade_rl.rewards.code_asserts`). One report line per statement goes to fd 3 (the host):
``{"kind": null}`` (passed), ``{"kind": "wrong_answer" | "runtime_error" | "memory", "error":
..., "ended": bool}`` (``ended``: the program's process is gone), or ``{"broken": why}`` (the
tests' own code fails, or passes the program something that is not plain).
"""

import ast
import builtins
import json
import os
import re
import socket
import sys

#: how deep a value may nest (the JSON parser and the comparisons recurse)
MAX_DEPTH = 100
#: the longest integer that crosses, in digits (CPython's own default limit for int <-> str)
INT_DIGITS = 4300
#: a set or dict whose elements share one hash more often than this is refused
MAX_SAME_HASH = 8
#: the longest line the tester reads from the program (as the host's output cap)
MAX_LINE = 8 * 1024 * 1024
PLAIN_TYPES = (bool, bytearray, bytes, complex, dict, float, frozenset, int, list, set, str, tuple, type(None))
#: built-in types that may cross as values (an argument ``int``, a result ``str``)
TYPES = {kind.__name__: kind for kind in PLAIN_TYPES + (object, type, range) if kind is not type(None)}
REPLY_KEYS = ("value", "raised", "missing", "unsent")
#: the built-in exception classes by class, taken before any program runs (the names a reply may
#: give for what the program raised: its exception's nearest built-in class)
BUILTIN_EXCEPTIONS = {
    kind: name for name, kind in vars(builtins).items() if isinstance(kind, type) and issubclass(kind, BaseException)
}
#: built-in exceptions that steer control flow (ending a loop, a generator, the interpreter):
#: never raised into the tests' code in the tester, whatever the program raised
CONTROL_FLOW = (StopIteration, StopAsyncIteration, GeneratorExit, KeyboardInterrupt, SystemExit)
_STRINGS = r'"[^"\\]*(?:\\.[^"\\]*)*"'  # (compiled by re's cache when first used)
_BRACKETS = r"[^\[\]{}]+"


class NotPlain(TypeError):
    """A value that cannot leave its process: not made of plain values."""


# ----------------------------------------------------------------------------------------------
# plain values


def _base_value(value):
    """The value of an instance of a subclass of a plain type, as its base type, read through
    the base type's own slots (never the subclass's overrides); None when there is none."""
    for kind, read in (
        (int, int.__int__),
        (float, float.__float__),
        (str, str.__str__),
        (bytes, lambda v: bytes(memoryview(v))),
        (bytearray, lambda v: bytearray(memoryview(v))),
        (complex, lambda v: complex(complex.real.__get__(v), complex.imag.__get__(v))),
        (tuple, lambda v: tuple(tuple.__iter__(v))),
        (list, lambda v: list(list.__iter__(v))),
        (dict, lambda v: dict(dict.items(v))),
        (frozenset, lambda v: frozenset(frozenset.__iter__(v))),
        (set, lambda v: set(set.__iter__(v))),
    ):
        if isinstance(value, kind):
            return read(value)
    if hasattr(type(value), "__index__"):  # NumPy integers and the like: their int
        return int.__int__(type(value).__index__(value))
    return None


def encode(value, depth=0):
    """``value`` as a JSON-ready structure of plain values (module docstring); NotPlain if it
    is not one."""
    if depth > MAX_DEPTH:
        raise NotPlain(f"a value nested more than {MAX_DEPTH} deep")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [encode(item, depth + 1) for item in value]
    if kind in (tuple, set, frozenset):
        return {kind.__name__: [encode(item, depth + 1) for item in value]}
    if kind is dict:
        return {"dict": [[encode(key, depth + 1), encode(item, depth + 1)] for key, item in value.items()]}
    if kind in (bytes, bytearray):
        return {kind.__name__: value.hex()}
    if kind is complex:
        return {"complex": [value.real, value.imag]}
    if kind is type and TYPES.get(value.__name__) is value:
        return {"type": value.__name__}
    base = _base_value(value)
    if base is None:
        raise NotPlain(f"a {kind.__module__}.{kind.__qualname__} object")
    return encode(base, depth)


def _check_hashes(items):
    """Refuse elements that share hashes beyond :data:`MAX_SAME_HASH` (a hash flood)."""
    if len(items) <= 4 * MAX_SAME_HASH:
        return
    counts = {}
    for item in items:
        key = hash(item)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > MAX_SAME_HASH:
            raise ValueError(f"more than {MAX_SAME_HASH} elements of a set or dict share one hash")


def _elements(body, depth, what):
    if type(body) is not list:
        raise ValueError(f"{what}: expected a list")
    return [decode(item, depth + 1) for item in body]


def decode(data, depth=0):
    """The plain value of parsed JSON ``data`` (module docstring): exactly the built-in types,
    ValueError for anything else."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} deep")
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [decode(item, depth + 1) for item in data]
    if kind is not dict or len(data) != 1:
        raise ValueError(f"not a plain value: {str(data)[:80]}")
    ((tag, body),) = data.items()
    try:
        if tag == "tuple":
            return tuple(_elements(body, depth, tag))
        if tag in ("set", "frozenset"):
            items = _elements(body, depth, tag)
            _check_hashes(items)
            return (set if tag == "set" else frozenset)(items)
        if tag == "dict":
            pairs = _elements(body, depth, tag)
            if not all(type(pair) is list and len(pair) == 2 for pair in pairs):
                raise ValueError("dict: expected [key, value] pairs")
            _check_hashes([key for key, _ in pairs])
            return dict(pairs)
        if tag in ("bytes", "bytearray") and type(body) is str:
            return (bytes if tag == "bytes" else bytearray).fromhex(body)
        if tag == "complex" and type(body) is list and len(body) == 2:
            if all(type(part) in (int, float) for part in body):
                return complex(*body)
        if tag == "type" and type(body) is str and body in TYPES:
            return TYPES[body]
    except TypeError as error:  # an unhashable element of a set, a key of a dict
        raise ValueError(f"{tag}: {error}") from None
    raise ValueError(f"not a plain value: {str(data)[:80]}")


def _parse_int(digits):
    if len(digits.lstrip("-")) > INT_DIGITS:
        raise ValueError(f"an integer of more than {INT_DIGITS} digits")
    return int(digits)


def nested_deeper_than(text, depth):
    """Whether JSON ``text`` nests arrays / objects more than ``depth`` deep at the start of
    some run of ``depth`` brackets (so anything nesting more than twice ``depth`` is caught);
    linear, and at C speed but for one step per ``depth`` brackets."""
    if text.count("[") + text.count("{") <= depth:
        return False
    skeleton = re.sub(_BRACKETS, "", re.sub(_STRINGS, "", text))
    level = 0
    for start in range(0, len(skeleton), depth):
        chunk = skeleton[start : start + depth]
        level += chunk.count("[") + chunk.count("{") - chunk.count("]") - chunk.count("}")
        if level > depth:
            return True
    return False


def parse_json(data):
    """One line of JSON from the other side, parsed in bounded time and memory: ValueError
    for anything that is not UTF-8 JSON nesting at most :data:`MAX_DEPTH` deep (twice that
    at the very most) with integers of at most :data:`INT_DIGITS` digits."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    if nested_deeper_than(text, MAX_DEPTH):
        raise ValueError(f"nested more than {MAX_DEPTH} deep")
    try:
        return json.loads(text, parse_int=_parse_int)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} deep") from None


def is_reply(data):
    """Whether parsed JSON is one of the program's replies (exactly one of :data:`REPLY_KEYS`)."""
    return type(data) is dict and sum(key in data for key in REPLY_KEYS) == 1


def dumps(data):
    """One JSON line (ASCII, so a lone surrogate of a ``str`` crosses too)."""
    return (json.dumps(data, separators=(",", ":")) + "\n").encode()


def loads(data):
    """The plain value of one JSON line written by :func:`encode` (ValueError otherwise)."""
    return decode(parse_json(data))


# ----------------------------------------------------------------------------------------------
# the program's side


def _described(error):
    try:
        return str(error)[:500]
    except BaseException:  # noqa: BLE001 - a program's exception may refuse even str()
        return "?"


def builtin_ancestor(error):
    """The name of the nearest built-in class of ``error``'s type (``ValueError`` for the
    program's ``class Bad(ValueError)``, ``Exception`` for its own ``class StopIteration(
    Exception)``): what the reply says it raised, never a name the program chose."""
    for kind in type.__dict__["__mro__"].__get__(type(error)):
        name = BUILTIN_EXCEPTIONS.get(kind)
        if name is not None:
            return name
    return "BaseException"


def answer(namespace, request):
    """The reply to one request (module docstring), as a JSON-ready dict."""
    try:
        if "eval" in request:
            for name in request.get("needs") or ():
                if name not in namespace:
                    return {"missing": name}
            aliases = {alias: namespace[name] for alias, name in (request.get("aliases") or {}).items()}
            value = eval(compile(request["eval"], "test", "eval", dont_inherit=True), namespace, aliases)
        else:
            name = request["call"]
            if name not in namespace:
                return {"missing": name}
            args = [decode(item) for item in request.get("args") or ()]
            kwargs = {key: decode(item) for key, item in (request.get("kwargs") or {}).items()}
            value = namespace[name](*args, **kwargs)
        return {"value": encode(value)}
    except NotPlain as error:
        return {"unsent": _described(error)}
    except BaseException as error:  # noqa: BLE001 - the program's exception, reported as data
        return {"raised": builtin_ancestor(error), "message": _described(error)}


def serve(config):
    """The program's process: load ``config["program"]`` after the prompt's code (and the
    setup when ``config["setup"]``), then answer the requests on stdin (``config["upfront"]``)
    or from the tester on fd 3."""
    write, leave = os.write, os._exit  # bound before the program runs
    requests = None
    if config["upfront"]:
        requests = [json.loads(line) for line in sys.stdin.buffer.read().splitlines() if line.strip()]
    namespace = {"__name__": "solution", "__builtins__": builtins}
    for source, filename in ((config["prelude"], "prompt.py"), (config["program"], "solution.py")):
        exec(compile(source, filename, "exec", dont_inherit=True), namespace)
    if config["setup"]:
        exec(compile(config["setup"], "setup.py", "exec", dont_inherit=True, optimize=0), namespace)
    lines = requests if requests is not None else os.fdopen(3, "rb", closefd=False)
    for line in lines:
        request = line if requests is not None else json.loads(line)
        data = dumps(answer(namespace, request))
        while data:
            data = data[write(3, data) :]
    leave(0)


# ----------------------------------------------------------------------------------------------
# the tester's side


class ProgramError(Exception):
    """The program failed a call in a way no built-in exception says (it raised an exception
    of its own class, does not define the function, returned what is not plain data)."""


class ProgramEnded(BaseException):
    """The program's process is gone (it exited, crashed or was stopped at a limit), or it
    raised SystemExit or KeyboardInterrupt in a call, which would have ended it. Not an
    ``Exception``: tests that catch the program's exceptions do not catch its end."""


class CannotSend(Exception):
    """The tests pass the program something that is not plain: they cannot run this way."""


class Channel:
    """The tester's end of the socket to the program: one request line out, one reply in."""

    def __init__(self, fd):
        self._socket = socket.socket(fileno=fd)
        self._reader = self._socket.makefile("rb")

    def ask(self, request):
        try:
            self._socket.sendall(dumps(request))
            line = self._reader.readline(MAX_LINE + 1)
        except OSError as error:
            raise ProgramEnded(f"the program's process is gone ({error})") from None
        if not line.endswith(b"\n"):
            if not line:
                raise ProgramEnded("the program's process ended during the call")
            raise ProgramError(f"the program's reply is longer than {MAX_LINE} bytes")
        try:
            reply = parse_json(line)
        except ValueError as error:
            raise ProgramError(f"the program's reply is not readable: {error}") from None
        if not is_reply(reply):
            raise ProgramError(f"the program's reply is not a reply: {line[:80]!r}")
        return reply


def _rebuilt_exception(name, message):
    """What the program reported raising, for the tests' code: an instance of the built-in
    class it names when that is an ordinary error (``except ValueError`` in a test works as it
    would around a direct call); ProgramEnded for an exit; a ProgramError (an ordinary error)
    for StopIteration and StopAsyncIteration, which would end the tests' own loops, ``map``
    and ``zip`` as if every case had passed, and for any name that is no built-in exception."""
    kind = getattr(builtins, str(name), None)
    if not (isinstance(kind, type) and BUILTIN_EXCEPTIONS.get(kind) == name):
        return ProgramError(f"{str(name)[:80]}: {message}")
    if issubclass(kind, (GeneratorExit, KeyboardInterrupt, SystemExit)):
        return ProgramEnded(f"the program raised {name} in a call")
    if issubclass(kind, CONTROL_FLOW) or not issubclass(kind, Exception):
        return ProgramError(f"the program raised {name}: {message}")
    try:
        return kind(message)
    except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError needs five arguments
        return ProgramError(f"{name}: {message}")


class ProgramFunction:
    """A function of the program as the tests see it: its arguments go to the program as plain
    values, its result comes back as a plain value (or its exception as a built-in one)."""

    def __init__(self, channel, name):
        self._channel, self.__name__ = channel, name

    def __repr__(self):
        return f"<function {self.__name__} of the program>"

    def _sent(self, value):
        try:
            return encode(value)
        except NotPlain as error:
            raise CannotSend(
                f"the tests pass {error} to {self.__name__}: only plain values reach the program"
            ) from None

    def __call__(self, *args, **kwargs):
        request = {"call": self.__name__, "args": [self._sent(a) for a in args]}
        request["kwargs"] = {str(key): self._sent(value) for key, value in kwargs.items()}
        reply = self._channel.ask(request)
        if "value" in reply:
            try:
                return decode(reply["value"])
            except ValueError as error:
                raise ProgramError(f"{self.__name__} returned what cannot be read: {error}") from None
        if "missing" in reply:
            raise ProgramError(f"the program does not define {self.__name__}")
        if "unsent" in reply:
            raise ProgramError(f"{self.__name__} returned {reply['unsent']}, which is not plain data")
        raise _rebuilt_exception(reply["raised"], reply.get("message"))


def _where(error, sources):
    """The line of the tests' code where ``error`` was raised, for the report."""
    found, trace = "", error.__traceback__
    while trace is not None:
        found = _line_of(trace.tb_frame.f_code.co_filename, trace.tb_lineno, sources) or found
        trace = trace.tb_next
    return found


def _line_of(filename, line, sources):
    """``"test 0 line 2: assert ..."`` for a line of the tests' code, "" for other code."""
    text = sources.get(filename)
    if text is None:
        return ""
    lines = text.splitlines()
    return f"{filename} line {line}: {lines[line - 1].strip() if 0 < line <= len(lines) else ''}"


class Verdict:
    """The first assertion that failed in the statement being run (``__verdict__`` in the tests'
    namespace): the tests' ``assert`` statements and ``raise AssertionError`` call it instead
    of raising (:class:`RecordedAssertions`), so a failed assertion does not end the statement
    and the program is asked every call it would be asked had it passed."""

    def __init__(self, sources):
        self.failure, self.sources = None, sources

    def __call__(self, value, message):
        """``assert value, message()``; the message is made only when it fails."""
        if not value:
            self.fail(lambda: AssertionError(message()) if message is not None else AssertionError())

    def fail(self, error):
        """``raise error()``, recorded (the first of a statement) instead of raised."""
        if self.failure is None:
            frame = sys._getframe(1)
            frame = frame.f_back if frame.f_code is Verdict.__call__.__code__ else frame
            self.failure = (error(), _line_of(frame.f_code.co_filename, frame.f_lineno, self.sources))


def _conjuncts(test):
    """``a and b and c`` as ``[a, b, c]`` (each asserted on its own), else ``[test]``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [part for value in test.values for part in _conjuncts(value)]
    return [test]


def _raises_assertion_error(node):
    exception = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exception, ast.Name) and exception.id == "AssertionError"


class RecordedAssertions(ast.NodeTransformer):
    """The tests' code with every assertion recorded by ``__verdict__`` instead of raised:
    ``assert a and b, m`` becomes ``__verdict__(a, lambda: m); __verdict__(b, lambda: m)``, and
    ``raise AssertionError(...)`` becomes ``__verdict__.fail(lambda: AssertionError(...))``."""

    def visit_Assert(self, node):
        message = ast.Lambda(_no_arguments(), node.msg) if node.msg is not None else ast.Constant(None)
        calls = []
        for test in _conjuncts(node.test):
            call = ast.Call(ast.Name("__verdict__", ast.Load()), [test, message], [])
            calls.append(ast.copy_location(ast.Expr(ast.copy_location(call, test)), node))
        return calls

    def visit_Raise(self, node):
        if node.exc is None or not _raises_assertion_error(node):
            return node
        fail = ast.Attribute(ast.Name("__verdict__", ast.Load()), "fail", ast.Load())
        call = ast.Call(fail, [ast.Lambda(_no_arguments(), node.exc)], [])
        return ast.copy_location(ast.Expr(ast.copy_location(call, node)), node)


def _no_arguments():
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def compiled_tests(source, filename):
    """The tests' code ``source``, its assertions recorded (:class:`RecordedAssertions`)."""
    tree = RecordedAssertions().visit(ast.parse(source, filename))
    return compile(ast.fix_missing_locations(tree), filename, "exec", dont_inherit=True, optimize=0)


def every_item(iterable):
    """``all`` for the tests' code, reading every item (calling the program for each) before
    answering, so that how many calls the program gets does not tell it when one failed."""
    return builtins.all(list(iterable))


def any_item(iterable):
    """``any`` for the tests' code, reading every item (see :func:`every_item`)."""
    return builtins.any(list(iterable))


def run_statement(statement, filename, namespace, sources, verdict):
    """The report of one statement (module docstring): its first failed assertion (``verdict``,
    the namespace's ``__verdict__``), else how it ended."""
    try:
        exec(compiled_tests(statement, filename), namespace)
        error, where = None, ""
    except CannotSend as error:
        return {"broken": str(error)}
    except BaseException as raised:  # noqa: BLE001 - the test's verdict, whatever ended it
        error, where = raised, _where(raised, sources)
    ended = isinstance(error, ProgramEnded)
    if verdict.failure is not None:
        error, where = verdict.failure
    if error is None:
        return {"kind": None}
    if isinstance(error, AssertionError):
        kind = "wrong_answer"
    else:
        kind = "memory" if isinstance(error, MemoryError) else "runtime_error"
    message = f"{type(error).__name__}: {_described(error)}".rstrip(": ")
    message = f"{message} ({where})" if where else message
    return {"kind": kind, "error": message, "ended": ended}


def test(config):
    """The tester's process: the prompt's code, stand-ins for ``config["names"]``, the setup,
    then every statement from ``config["start"]`` on, one report line each to fd 3, whatever
    the earlier ones reported (only the program's process ending, or the tests' own code
    failing, stops them: neither depends on whether an answer was right)."""
    namespace = {"__name__": "tests", "__builtins__": builtins, "all": every_item, "any": any_item}
    sources = {"prompt.py": config["prelude"], "setup.py": config["setup"]}
    namespace["__verdict__"] = Verdict(sources)
    channel = Channel(4)
    try:
        for name in config["modules"]:
            __import__(name)
            namespace[name] = sys.modules[name]
        exec(compile(config["prelude"], "prompt.py", "exec", dont_inherit=True, optimize=0), namespace)
        for name in config["names"]:
            namespace[name] = ProgramFunction(channel, name)
        exec(compiled_tests(config["setup"], "setup.py"), namespace)
        if namespace["__verdict__"].failure is not None:  # an assertion of the setup itself
            raise namespace["__verdict__"].failure[0]
        broken = None
    except (ProgramError, ProgramEnded) as error:  # the setup called the program, which failed
        report = {"kind": "runtime_error", "error": f"the setup called the program: {_described(error)}"}
        os.write(3, dumps({**report, "ended": isinstance(error, ProgramEnded)}))
        os._exit(0)
    except BaseException as error:  # noqa: BLE001 - the row's own code fails: a named error
        broken = f"the tests' code fails in the tester: {type(error).__name__}: {_described(error)}"
    for index, statement in enumerate(config["statements"]):
        if index < config["start"]:
            continue
        filename = f"test {index}"
        sources[filename] = statement
        verdict = namespace["__verdict__"] = Verdict(sources)  # (the setup's functions read it there)
        scope = namespace
        if config["shadows"][index]:  # built-in names this statement alone takes from the program
            scope = {**namespace, **{name: ProgramFunction(channel, name) for name in config["shadows"][index]}}
        report = {"broken": broken} if broken else run_statement(statement, filename, scope, sources, verdict)
        os.write(3, dumps(report))
        if report.get("ended") or "broken" in report:
            break
    os._exit(0)
