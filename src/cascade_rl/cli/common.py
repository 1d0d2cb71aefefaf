"""What every ``cascade`` command shares (DESIGN.md, layer ``cli``): where output goes, the one
way an error is printed and the exit codes, the parsing of ``KEY=VALUE`` options, opening a
model named on the command line, and option groups as objects.

**Output.** Results (tables, reports) go to stdout (:data:`stdout`); errors, notes and progress
to stderr (:data:`console`), one line each, file paths never wrapped.

**Errors and exit codes.** Every command reports an error as ``error: MESSAGE`` on stderr
(:func:`fail`), and exits with

* :data:`EXIT_PROBLEMS` (1) when it ran and found problems the user must look at (malformed
  rows counted and skipped, lines a scorer could not score, prompts shared between stages, a
  generation that failed: run the same command again to resume);
* :data:`EXIT_USAGE` (2) when it refused its input before doing the work (an invalid recipe
  or file, a bad option); click's own usage errors (an unknown option) exit 2 too.

**Option groups** (:func:`option_groups`): options several commands take are declared once, as
a dataclass whose fields are typer options, and reach a command as one object (e.g. the SWE
commands' instances and checkouts, the data jobs' resume and malformed-row options, and the
sampling flags of every command that samples, :func:`sampling_options`: one
:class:`~cascade_rl.llm.base.Sampling` value).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperOption

EXIT_PROBLEMS = 1
EXIT_USAGE = 2

#: errors, notes and progress (stderr); results go to :data:`stdout`
console = Console(stderr=True, soft_wrap=True)
stdout = Console()

GENERATOR_HELP = (
    "A local checkpoint directory (or local:PATH) or an OpenAI-compatible server, http://HOST:PORT/v1#MODEL."
)


def fail(error: object, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``error: MESSAGE`` on stderr; returns the exit to raise (``raise fail(...)``)."""
    console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False)
    return typer.Exit(code)


def note(message: str) -> None:
    """Print ``note: MESSAGE`` on stderr (something the user should know; not an error)."""
    console.print(f"[yellow]note:[/yellow] {escape(message)}", highlight=False)


def say(message: str) -> None:
    """A line of progress or a result path on stderr, printed as it is."""
    console.print(message, markup=False, highlight=False)


# ---------------------------------------------------------------------------- command groups and help
def command_group(help: str, **settings: Any) -> typer.Typer:
    """A group of commands (``cascade data``, ``cascade swe``, ...) as every group is made: help
    read as Markdown (a docstring's paragraphs reflow into sentences; ``[default: ...]`` stays
    text), no shell-completion commands, the help when no command is given."""
    return typer.Typer(help=help, rich_markup_mode="markdown", no_args_is_help=True, add_completion=False, **settings)


def _option_type(option: TyperOption, ctx: Any) -> str | None:
    """The value an option takes in help (``<int>``), and none for a flag: typer 0.29 shows a
    flag as ``--resume <bool>`` though it takes no value."""
    return None if option.is_flag else _TYPER_OPTION_TYPE(option, ctx)


# typer's own method, replaced in this one place (tests/cli/test_common.py pins the effect)
_TYPER_OPTION_TYPE = TyperOption.display_type_rich
TyperOption.display_type_rich = _option_type  # type: ignore[method-assign]


# ---------------------------------------------------------------------------- parsing options
def parse_pairs(values: list[str], what: str, option: str) -> dict[str, str]:
    """``LEFT=RIGHT`` values of a repeatable option (``what`` shows the form, e.g.
    ``NAME=PATH``); a malformed one fails naming the option."""
    pairs = {}
    for value in values:
        left, sep, right = value.partition("=")
        if not sep or not left.strip() or not right.strip():
            raise fail(f"{option} {value!r}: expected {what}")
        pairs[left.strip()] = right.strip()
    return pairs


def parse_options(pairs: list[str]) -> dict[str, dict]:
    """``DOMAIN.KEY=VALUE`` pairs into ``{domain: {key: value}}`` (values parsed as JSON when
    they are JSON, else kept as strings)."""
    options: dict[str, dict] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        domain, dot, name = key.partition(".")
        if not sep or not dot:
            raise fail(f"--option {pair!r}: expected DOMAIN.KEY=VALUE, e.g. math.language_penalty=-1")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        options.setdefault(domain, {})[name] = parsed
    return options


def checked_options(options: dict[str, dict]) -> dict[str, dict]:
    """Every ``--option`` names a known domain and an option it takes, with a value of its type
    (exit code 2 naming the option otherwise), before anything is scored or served."""
    from cascade_rl.rewards.registry import OptionError, check_options

    checked = {}
    for domain, values in options.items():
        try:
            checked[domain] = check_options(domain, values)
        except KeyError as error:
            raise fail(f"--option {domain}.{next(iter(values))}: {str(error).strip(chr(34) + chr(39))}") from None
        except OptionError as error:
            raise fail(f"--option {error}") from None
    return checked


def open_generator(spec: str, *, option: str = "--generator", server: dict | None = None, local: dict | None = None):
    """The model a command names (:func:`cascade_rl.llm.load_generator`), with the command's
    settings for a server or a local model; a spec that names neither fails naming the option."""
    from cascade_rl.llm import load_generator
    from cascade_rl.llm.transport import is_server_spec

    if not is_server_spec(spec) and not Path(spec.removeprefix("local:")).expanduser().is_dir():
        raise fail(f"{option} {spec}: not a model directory nor a server URL ({GENERATOR_HELP})")
    try:
        return load_generator(spec, server=server, local=local)
    except (ValueError, OSError) as error:
        raise fail(f"{option} {spec}: {error}") from None


# ---------------------------------------------------------------------------- option groups
def option_groups(**groups: type) -> Callable[[Callable], Callable]:
    """Give a command the options of each option-group dataclass in ``groups`` (fields declared
    with ``typer.Option``); the command receives each group as one object, in the parameter of
    its name. ``@option_groups(job=JobOptions)`` then ``def convert(..., job: JobOptions)``."""

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command)
        own = [p for p in signature.parameters.values() if p.name not in groups]
        added, annotations = [], {k: v for k, v in command.__annotations__.items() if k not in groups}
        for group in groups.values():
            hints = typing.get_type_hints(group)
            for field in dataclasses.fields(group):
                added.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=field.default))
                annotations[field.name] = hints[field.name]

        @functools.wraps(command)
        def wrapper(**values: Any) -> Any:
            for name, group in groups.items():
                values[name] = group(**{f.name: values.pop(f.name) for f in dataclasses.fields(group)})
            return command(**values)

        wrapper.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        wrapper.__annotations__ = annotations
        return wrapper

    return decorate


def sampling_options(max_tokens: int, *, top_k: bool = True, panel: str | None = "Sampling") -> type:
    """The option group of the sampling flags a sampling command takes (``--temperature``,
    ``--top-p``, ``--max-tokens`` with this command's default, ``--top-k`` unless ``top_k`` is
    False), whose ``sampling(n)`` is the one :class:`~cascade_rl.llm.base.Sampling` value the
    command passes on (checked there: a bad value is a one-line usage error)."""

    def option(default: Any, flag: str, text: str, **limits: Any) -> Any:
        return typer.Option(default, flag, help=text, rich_help_panel=panel, **limits)

    fields = [
        ("temperature", float, option(0.6, "--temperature", "Sampling temperature (paper: 0.6).", min=0.0)),
        ("top_p", float, option(0.95, "--top-p", "Nucleus sampling (paper: 0.95).", min=0.0, max=1.0)),
        ("max_tokens", int, option(max_tokens, "--max-tokens", "Tokens per sampled response.", min=1)),
    ]
    if top_k:
        fields.append(("top_k", int, option(0, "--top-k", "Top-k sampling (the RL stage's, e.g. 20); 0 = off.", min=0)))

    def sampling(self: Any, n: int = 1) -> Any:
        from cascade_rl.llm.base import Sampling

        try:
            return Sampling(n, self.temperature, self.top_p, self.max_tokens, getattr(self, "top_k", 0))
        except ValueError as error:
            raise fail(error) from None

    return dataclasses.make_dataclass("SamplingOptions", fields, namespace={"sampling": sampling})


def split_format(text: str, option: str) -> tuple[Path, str | None, dict[str, Any]]:
    """``FILE[:FORMAT[,KEY=VALUE...]]`` of a ``NAME=FILE[:FORMAT]`` option: the file, the public
    format it is read through (as ``cascade data convert -f``) and that converter's options (e.g.
    ``mbpp.jsonl:mbpp,split=test``), when the text after the last ``:`` names a format."""
    from cascade_rl.data.formats import FORMATS

    path, sep, tail = text.rpartition(":")
    fmt, *settings = tail.split(",")
    if not sep or "/" in tail or (fmt not in FORMATS and Path(text).exists()):
        return Path(text).expanduser(), None, {}
    if fmt not in FORMATS:
        raise fail(f"{option} {text!r}: unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    options = parse_pairs(settings, "FORMAT,KEY=VALUE", option)
    return Path(path).expanduser(), fmt, {key: _json_or_text(value) for key, value in options.items()}


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
