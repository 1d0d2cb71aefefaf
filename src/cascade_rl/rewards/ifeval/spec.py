"""How a verifiable instruction is declared and how its kwargs are checked (SPEC section 6, IF-RL).

An :class:`Instruction` pairs an id (``"keywords:frequency"``) with a *checker*, a plain function
``checker(text, *, kwarg1, kwarg2, ...) -> bool``, and a description template. The checker's
keyword-only parameters **are** the instruction's kwargs: their names, their types (``int``,
``float``, ``str``, ``list[str]``, a ``Literal`` of choices) and their bounds (``Count``: >= 0,
``Ordinal``: >= 1, ``Letter``: one character) are read from its signature, so the documentation,
the validation and the fuzz tests cannot drift apart.

Kwargs are validated the way IFEval data needs: keys whose value is ``None`` (or an empty string,
list or dict) are ignored (IFEval rows carry every kwarg of every instruction, mostly ``None``;
IFEval itself drops every falsy value, here ``0`` stays a value); an unexpected key, a missing
required key or a value of the wrong type raises ``ValueError`` naming the instruction and key.
Integral floats (``3.0``, common after a trip through Parquet / pandas) are accepted as ints.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from cascade_rl.chat import last_user_text

#: IFEval's two comparison relations: "less than" -> actual < N; "at least" -> actual >= N.
Relation = Literal["less than", "at least"]


@dataclass(frozen=True)
class AtLeast:
    minimum: float


@dataclass(frozen=True)
class OneLetter:
    """Marks a ``str`` parameter that must be a single character (after stripping). The official
    IFEval checker accepts any one character -- ``#`` included -- and counts it; only longer or
    empty values are invalid there (it then draws a random letter; here they are an error)."""


Count = Annotated[int, AtLeast(0)]
Ordinal = Annotated[int, AtLeast(1)]
Percentage = Annotated[float, AtLeast(0)]
Letter = Annotated[str, OneLetter()]


def compare(actual: float, relation: str, target: float) -> bool:
    """IFEval's relation: ``less than`` -> actual < target, ``at least`` -> actual >= target."""
    if relation == "less than":
        return actual < target
    if relation == "at least":
        return actual >= target
    raise ValueError(f"relation must be 'less than' or 'at least', got {relation!r}")


@dataclass(frozen=True)
class Param:
    """One kwarg of an instruction, read from the checker's signature."""

    name: str
    kind: type
    required: bool
    minimum: float | None = None
    choices: tuple[str, ...] | None = None
    one_letter: bool = False

    def coerce(self, instruction_id: str, value: Any) -> Any:
        """``value`` converted to this parameter's type, or ValueError naming the problem."""
        where = f"{instruction_id}: kwarg {self.name!r}"
        if self.choices is not None:
            if value not in self.choices:
                raise ValueError(f"{where} must be one of {list(self.choices)}, got {value!r}")
            return value
        if self.kind is list:
            if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
                raise ValueError(f"{where} must be a non-empty list of strings, got {value!r}")
            return [self._text(where, item) for item in value]
        if self.kind is str:
            return self._text(where, value)
        number = self._number(where, value)
        if self.minimum is not None and number < self.minimum:
            raise ValueError(f"{where} must be >= {self.minimum:g}, got {value!r}")
        return number

    def _text(self, where: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where} must be a non-empty string, got {value!r}")
        if self.one_letter and len(value.strip()) != 1:
            raise ValueError(f"{where} must be a single letter (one character), got {value!r}")
        return value

    def _number(self, where: str, value: Any) -> int | float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where} must be a number, got {value!r}")
        if self.kind is int:
            if value != int(value):
                raise ValueError(f"{where} must be an integer, got {value!r}")
            return int(value)
        return float(value)


def params_of(checker: Callable[..., bool]) -> tuple[Param, ...]:
    """The kwargs of a checker: its keyword-only parameters with their types and bounds."""
    hints = typing.get_type_hints(checker, include_extras=True)
    params = []
    for parameter in inspect.signature(checker).parameters.values():
        if parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        params.append(_param(parameter.name, hints[parameter.name], parameter.default is inspect.Parameter.empty))
    return tuple(params)


def _param(name: str, hint: Any, required: bool) -> Param:
    minimum, one_letter = None, False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # Optional[X] -> X
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        hint = options[0] if len(options) == 1 else hint
    if typing.get_origin(hint) is Annotated:
        hint, *metadata = typing.get_args(hint)
        for marker in metadata:
            if isinstance(marker, AtLeast):
                minimum = marker.minimum
            one_letter = one_letter or isinstance(marker, OneLetter)
    if typing.get_origin(hint) is Literal:
        return Param(name, str, required, choices=tuple(typing.get_args(hint)))
    kind = list if typing.get_origin(hint) is list else hint
    if kind not in (int, float, str, list):
        raise TypeError(f"unsupported kwarg type {hint!r} for {name!r}")
    return Param(name, kind, required, minimum, None, one_letter)


Template = str | Callable[[Mapping[str, Any]], str]


def _blank(value: Any) -> bool:
    """None or an empty string / list / dict: an unset kwarg in IFEval-style rows."""
    return value is None or isinstance(value, (str, list, tuple, dict)) and len(value) == 0


@dataclass(frozen=True)
class Instruction:
    """A verifiable instruction: id, checker, description template (``str.format`` over the
    kwargs, or a function of them) and, for instructions that repeat the request, the name of
    the kwarg that may be taken from the prompt (``prompt_param``)."""

    id: str
    checker: Callable[..., bool]
    template: Template
    prompt_param: str | None = None
    #: what the checker saw in a text it rejects (``explain(text, **kwargs) -> str``), for the
    #: reason a failed instruction gives (:meth:`why_not`); None: the request alone is the reason
    explain: Callable[..., str] | None = None
    params: tuple[Param, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", params_of(self.checker))
        names = {p.name for p in self.params}
        if self.prompt_param is not None and self.prompt_param not in names:
            raise ValueError(f"{self.id}: prompt_param {self.prompt_param!r} is not a kwarg")

    @property
    def family(self) -> str:
        return self.id.split(":", 1)[0]

    def arguments(
        self, kwargs: Mapping[str, Any] | None, prompt: Any = None, *, need_prompt_param: bool = True
    ) -> dict[str, Any]:
        """Validated checker arguments from a raw kwargs dict (unset values ignored). A missing
        ``prompt_param`` is taken from the prompt's last user turn, without this instruction's
        own description sentence."""
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ValueError(f"{self.id}: kwargs must be a dict, got {type(kwargs).__name__}")
        given = {key: value for key, value in (kwargs or {}).items() if not _blank(value)}
        by_name = {p.name: p for p in self.params}
        unexpected = sorted(set(given) - set(by_name))
        if unexpected:
            accepted = ", ".join(by_name) or "none"
            raise ValueError(f"{self.id}: unexpected kwarg {unexpected[0]!r} (accepted kwargs: {accepted})")
        arguments = {name: by_name[name].coerce(self.id, value) for name, value in given.items()}
        if self.prompt_param and self.prompt_param not in arguments and prompt is not None:
            request = self._request_from_prompt(prompt, arguments)
            if request:
                arguments[self.prompt_param] = request
        missing = [
            p.name
            for p in self.params
            if p.required and p.name not in arguments and (need_prompt_param or p.name != self.prompt_param)
        ]
        if missing:
            hint = " (or pass the prompt)" if missing[0] == self.prompt_param else ""
            raise ValueError(f"{self.id}: missing kwarg {missing[0]!r}{hint}")
        return arguments

    def _request_from_prompt(self, prompt: Any, arguments: Mapping[str, Any]) -> str:
        """The request inside the prompt's last user turn: the turn without this instruction's
        sentence, or, when the sentence quotes the request ("... Request: {prompt_to_repeat}"),
        the quoted part."""
        text = last_user_text(prompt).strip()
        marker = "\x00"
        try:
            description = self.render({**arguments, self.prompt_param: marker})
        except (KeyError, IndexError, ValueError):
            return text
        if marker not in description:
            return text.replace(description, "").strip()
        before, _, after = description.partition(marker)
        start = text.find(before)
        if start < 0:
            return text
        quoted = text[start + len(before) :]
        end = quoted.rfind(after) if after else -1
        return (quoted[:end] if end >= 0 else quoted).strip()

    def render(self, arguments: Mapping[str, Any]) -> str:
        if callable(self.template):
            return self.template(arguments)
        return self.template.format(**arguments)

    def describe(self, kwargs: Mapping[str, Any] | None) -> str:
        """The instruction text for ``kwargs`` (IFEval's ``build_description``)."""
        arguments = self.arguments(kwargs, need_prompt_param=False)
        try:
            return self.render(arguments)
        except KeyError as error:
            raise ValueError(f"{self.id}: the description needs kwarg {error.args[0]!r}") from None

    def follows(self, text: str, arguments: Mapping[str, Any]) -> bool:
        """IFEval's rule: an empty (all-whitespace) text follows nothing."""
        return bool(text.strip()) and bool(self.checker(text, **arguments))

    def why_not(self, text: str, arguments: Mapping[str, Any], limit: int = 160) -> str:
        """Why ``text`` does not follow the instruction: what the checker saw (:attr:`explain`),
        and what it asked (the description, cut at ``limit`` characters)."""
        if not text.strip():
            return "the answer is empty"
        try:
            asked = " ".join(self.render(arguments).split())
        except (KeyError, IndexError, ValueError):
            asked = self.id
        asked = asked if len(asked) <= limit else asked[: limit - 3] + "..."
        seen = self.explain(text, **arguments) if self.explain is not None else None
        return f"{seen}; asked: {asked}" if seen else f"asked: {asked}"


def build_registry(groups: Iterable[Sequence[Instruction]]) -> dict[str, Instruction]:
    """One explicit dict id -> Instruction; an id registered twice is an error."""
    registry: dict[str, Instruction] = {}
    for group in groups:
        for instruction in group:
            if instruction.id in registry:
                raise ValueError(f"instruction {instruction.id!r} registered twice")
            registry[instruction.id] = instruction
    return registry
