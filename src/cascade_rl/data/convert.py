"""``cascade data convert``: field mappings from the public formats of the paper's data and
benchmarks to the project's schemas (docs/data-formats.md; SPEC sections 3, 4, 6 and 9).

Each format is a function ``row -> dict`` (or :class:`~cascade_rl.data.job.Drop` for a row the
format itself excludes, such as a HelpSteer tie) that raises
:class:`~cascade_rl.data.rows.RowError` naming the field when a row does not have the format's
shape; :mod:`cascade_rl.data.formats` registers them under their names (with the paper's own
released datasets, :mod:`cascade_rl.data.released`). Samples of every format, written in the
public schema, are in ``tests/data/samples/`` (docs/data-formats.md lists the fields read).

Formats (the fields read are listed in docs/data-formats.md):

* ``nemo-gym``: NVIDIA's RL data in the NeMo Gym layout (``responses_create_params.input``
  and ``tools``), routed by ``agent_ref.name`` or, without one, by the verifier fields it carries
  (:func:`gym_domain`): ``expected_answer`` (math_with_code: ``expected_result``),
  ``verifier_metadata.unit_tests``, ``instruction_id_list`` / ``kwargs``, MCQA's ``options`` /
  ``expected_answer``, the workplace assistant's ``ground_truth``, structured outputs'
  ``schema_str`` -> math / code / ifeval / mcqa / workplace / structured_output RL rows, tools
  kept; SWE rows (``instance_dict``) -> instances;
* ``messages``: OpenAI-style chat rows (``messages``, ``tools``, ``reasoning_content``) -> SFT;
* ``helpsteer``: HelpSteer3 and HelpSteer2 preference pairs -> RM pairs, ties dropped;
* ``aime``: problem / answer rows -> math RL rows;
* ``gsm8k``: ``question``, ``answer`` (worked solution, then ``#### number``) -> math RL rows
  with the number as the answer and the worked solution kept for SFT;
* ``ifeval`` (alias ``ifbench``): ``key``, ``prompt``, ``instruction_id_list``, ``kwargs``;
* ``livecodebench``: public tests and private tests (JSON, or base64 + zlib + pickle decoded
  as plain data only), ``metadata.func_name``, ``contest_date`` -> code RL rows (``metadata``
  and the problem's identity kept for ``cascade data code-filter``);
* ``taco`` (alias ``apps``): ``question``, ``input_output``, ``starter_code`` -> code RL rows,
  with the first :data:`KEPT_SOLUTIONS` reference ``solutions``, the ``url`` and ``source``
  (``cascade data code-filter`` runs the solutions and deduplicates by URL);
* ``mbpp``: ``text``, ``test_list`` (+ ``challenge_test_list``), ``test_setup_code`` -> code RL
  rows with assert-style tests, ``split`` by task_id, the reference ``code`` as ``solutions``;
* ``gsm8k-sft``, ``mbpp-sft``: the same rows as SFT rows whose response is the reference
  (GSM8K's worked solution ending in ``\\boxed{}``, MBPP's ``code`` in a python block), with the
  reward fields kept for ``cascade data verify``;
* ``humaneval``: ``prompt``, ``test``, ``entry_point`` -> code RL rows with assert-style tests;
* ``mcq``: MMLU, MMLU-Pro, GPQA (options shuffled with a seed per question) ->
  ``multiple_choice`` RL rows with lettered options;
* ``bfcl``: BFCL rows with ``ground_truth`` or a ``--answers`` file -> ``tool_call`` RL rows
  with their tools, several acceptable values per argument;
* ``swebench``: SWE-bench instances, test lists decoded -> instances for ``cascade swe``.

**Why one file of about 780 lines** (DESIGN.md: files over ~500 lines say why): one
converter function per public format listed above, each independent of the others, with the
field helpers they share; one file is one table of public formats to read and to extend.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import pickle
import random
import re
import string
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from cascade_rl.data.job import Drop
from cascade_rl.data.rows import RowError, message_text, pluck
from cascade_rl.data.shapes import as_messages, normalise_preference, normalise_sft

MATH_SUFFIX = "Please reason step by step, and put your final answer within \\boxed{}."
CHOICE_SUFFIX = 'Answer with the letter of the correct option, as in "Answer: B".'
CODE_STDIN = (
    "Read the inputs from stdin, solve the problem and write the answer to stdout. Give your solution as "
    "one Python program in a ```python code block."
)
CODE_CALL = (
    "Use the following starter code and give your solution in a ```python code block:\n```python\n{starter}\n```"
)
CODE_FUNCTION = (
    "Give your solution (the function and any imports it needs) as one Python program in a ```python code block."
)
HUMANEVAL_TASK = (
    "Complete the following Python function:\n```python\n{prompt}\n```\n"
    "Give the complete function, with its signature, as one Python program in a ```python code block."
)
#: reference solutions a TACO / APPS row keeps (TACO has up to hundreds per problem)
KEPT_SOLUTIONS = 10
#: MBPP's standard split by task_id (Austin et al. 2021; the google-research release)
MBPP_SPLITS = {
    "prompt": range(1, 11),
    "test": range(11, 511),
    "validation": range(511, 601),
    "train": range(601, 975),
}
#: GSM8K's calculator annotations, ``<<48/2=24>>``
GSM8K_CALCULATOR = re.compile(r"<<[^<>]*>>")
GSM8K_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
#: BFCL's parameter types, as JSON schema types (BFCL's own conversion for OpenAI-style tools)
BFCL_TYPES = {
    "dict": "object",
    "float": "number",
    "double": "number",
    "tuple": "array",
    "list": "array",
    "any": "string",
    "bool": "boolean",
    "int": "integer",
    "long": "integer",
    "short": "integer",
    "byte": "integer",
    "char": "string",
    "hashmap": "object",
    "arraylist": "array",
}


# ----------------------------------------------------------------------------- helpers
def need(row: Mapping[str, Any], *names: str) -> Any:
    """The first of ``names`` (dotted paths allowed) present in ``row``, or RowError."""
    for name in names:
        value = pluck(row, name)
        if value is not None and value != "":
            return value
    raise RowError(f"missing field {' / '.join(repr(n) for n in names)}")


def with_suffix(text: str, suffix: str) -> str:
    return f"{text.rstrip()}\n\n{suffix}" if suffix else text


def json_field(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise RowError(f"{what} is not valid JSON ({error.msg})") from None
    return value


def row_id(row: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = pluck(row, name)
        if value is not None and value != "":
            return str(value)
    return None


def check_tests(tests: dict, what: str) -> dict:
    from cascade_rl.rewards.code import parse_tests

    try:
        parse_tests(tests)
    except ValueError as error:
        raise RowError(f"{what}: {error}") from None
    return tests


# ----------------------------------------------------------------------------- NeMo Gym
def openai_tools(tools: Any) -> list[dict]:
    """Tools as chat-completions schemas ``{"type": "function", "function": {...}}``, from the
    Responses API's flat form (``{"type": "function", "name", "parameters"}``), BFCL's bare
    function docs, or chat-completions schemas already."""
    if not tools:
        return []
    if not isinstance(tools, list):
        raise RowError("tools is not a list")
    out = []
    for tool in tools:
        if not isinstance(tool, Mapping):
            raise RowError("tools has an entry that is not an object")
        if isinstance(tool.get("function"), Mapping):
            out.append(dict(tool))
            continue
        if not isinstance(tool.get("name"), str):
            raise RowError("tools has an entry without a function name")
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        out.append({"type": "function", "function": function})
    return out


class UnknownInstruction(RowError):
    """An instruction id the ifeval reward has no checker for: every response would score 0 with
    an error. Malformed for the benchmark formats; the released datasets' formats drop the row."""


class NoReference(RowError):
    """A NeMo Gym row with nothing to verify an answer against (no expected answer, ground
    truth, constraints, schema or instance for its domain): NVIDIA's released RL data holds some.
    ``nemo-gym`` reports it as malformed; ``nemotron-cascade-2-rl`` counts and drops it."""


#: NeMo Gym agents (``agent_ref.name``, by prefix) -> the project's reward domain
GYM_AGENTS = (
    ("instruction_following", "ifeval"),
    ("ifbench", "ifeval"),
    ("mcqa", "mcqa"),
    ("workplace_assistant", "workplace"),
    ("structured_outputs", "structured_output"),
    ("math", "math"),
    ("code_gen", "code"),
    ("competitive_coding", "code"),
    ("swe", "swe"),
)
#: where NeMo Gym rows keep a math answer; ``expected_result`` is the math_with_code resources
#: server's name for it (at the top level, as that server reads it, or in verifier_metadata)
GYM_ANSWER_FIELDS = (
    "expected_answer",
    "verifier_metadata.expected_answer",
    "expected_result",
    "verifier_metadata.expected_result",
)
#: the fields each domain is verified with, in the order rows without an agent are routed by them
GYM_REFERENCE_FIELDS = {
    "swe": (
        "verifier_metadata.instance_dict",
        "responses_create_params.metadata.instance_dict",
        "problem_statement",
        "responses_create_params.metadata.problem_statement",
    ),
    "code": ("verifier_metadata.unit_tests", "unit_tests"),
    "ifeval": ("verifier_metadata.instruction_id_list", "instruction_id_list"),
    "workplace": ("ground_truth", "verifier_metadata.ground_truth"),
    "structured_output": ("schema_str", "verifier_metadata.schema_str"),
    "mcqa": ("options", "verifier_metadata.options"),
    "math": GYM_ANSWER_FIELDS,
}
#: what NeMo Gym's structured_outputs resources server reads besides ``schema_str``, kept verbatim
STRUCTURED_OUTPUT_FIELDS = (
    "schema_type",
    "problem_type",
    "schema_repr",
    "source_format",
    "num_turns",
    "source_record_id",
    "response_mode",
    "tool_name",
    "tool_schema_mode",
    "tool_payload_key",
    "tool_choice",
    "parallel_tool_calls",
    "source_schema_type",
    "num_tools",
    "num_distractors",
    "has_distractors",
    "instruction_layout",
    "instruction_detail_level",
    "system_instruction_style",
    "tool_name_style",
    "distractor_style",
    "tool_union_mode",
)


def _gym_messages(row: Mapping[str, Any]) -> list[dict]:
    raw = need(row, "responses_create_params.input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise RowError("responses_create_params.input is not a list of messages")
    messages = []
    for message in raw:
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer", "user", "assistant"):
            raise RowError("responses_create_params.input has a message without a valid role")
        role = "system" if message["role"] == "developer" else message["role"]
        messages.append({"role": role, "content": message_text(message.get("content"))})
    return messages


def _present(row: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    """The first of ``names`` that holds a value: None (what a Parquet or JSON loader fills into
    another domain's columns of a mixed file), an empty string, list or object do not."""
    for name in names:
        value = pluck(row, name)
        if value is not None and not (isinstance(value, (str, list, dict)) and not value):
            return value
    return None


def gym_domain(row: Mapping[str, Any]) -> str:
    """The reward domain of a NeMo Gym row: its agent's (``agent_ref.name``, :data:`GYM_AGENTS`),
    else the first domain whose verifier fields it carries (:data:`GYM_REFERENCE_FIELDS`). Raises
    :class:`NoReference` when neither names one."""
    agent = pluck(row, "agent_ref.name")
    if isinstance(agent, str) and agent:
        for prefix, domain in GYM_AGENTS:
            if agent.startswith(prefix):
                return domain
    for domain, names in GYM_REFERENCE_FIELDS.items():
        if _present(row, names) is not None:
            return domain
    agent_text = f"agent {agent!r}: " if agent else ""
    raise NoReference(
        f"{agent_text}no verifier fields: expected_answer (or expected_result), verifier_metadata.unit_tests, "
        "instruction_id_list, options, ground_truth, schema_str or verifier_metadata.instance_dict"
    )


def _reference(row: Mapping[str, Any], domain: str, what: str | None = None) -> Any:
    value = _present(row, GYM_REFERENCE_FIELDS[domain] if what is None else (what, f"verifier_metadata.{what}"))
    if value is None:
        names = " / ".join(GYM_REFERENCE_FIELDS[domain] if what is None else (what,))
        raise NoReference(f"{domain} row without its reference ({names})")
    return value


def _verbatim(row: Mapping[str, Any], names: tuple[str, ...]) -> dict:
    """The fields ``names`` the row carries (at the top level or in verifier_metadata), as they are."""
    out = {}
    for name in names:
        value = _present(row, (name, f"verifier_metadata.{name}"))
        if value is not None:
            out[name] = value
    return out


def _gym_math(row: Mapping[str, Any]) -> dict:
    return {"answer": str(_reference(row, "math"))}


def _gym_code(row: Mapping[str, Any]) -> dict:
    tests = json_field(_reference(row, "code"), "unit_tests")
    if not isinstance(tests, Mapping):
        raise RowError("unit_tests is not an object with inputs and outputs")
    return {"tests": check_tests(dict(tests), "unit_tests")}


def _gym_ifeval(row: Mapping[str, Any]) -> dict:
    kwargs = pluck(row, "verifier_metadata.kwargs", pluck(row, "kwargs"))
    return instruction_fields(_reference(row, "ifeval"), kwargs)


def _gym_mcqa(row: Mapping[str, Any]) -> dict:
    """NeMo Gym's mcqa fields, verbatim: the scorer reads them as that resources server does."""
    out = {"expected_answer": _reference(row, "mcqa", "expected_answer")}
    return {**_verbatim(row, ("options", "grading_mode", "template_metadata")), **out}


def _gym_workplace(row: Mapping[str, Any]) -> dict:
    """The reference calls (``[{name, arguments}]``, arguments as JSON text), verbatim; none at all
    is no reference (doing nothing would be right)."""
    return {"ground_truth": _reference(row, "workplace"), **_verbatim(row, ("category", "environment_name"))}


def _gym_structured_output(row: Mapping[str, Any]) -> dict:
    """``schema_str`` and the other fields NeMo Gym's structured_outputs server reads, verbatim
    (a schema with an invalid ``"required": false`` included: the scorer makes it strict)."""
    return {"schema_str": _reference(row, "structured_output"), **_verbatim(row, STRUCTURED_OUTPUT_FIELDS)}


GYM_REFERENCES: dict[str, Callable[[Mapping[str, Any]], dict]] = {
    "math": _gym_math,
    "code": _gym_code,
    "ifeval": _gym_ifeval,
    "mcqa": _gym_mcqa,
    "workplace": _gym_workplace,
    "structured_output": _gym_structured_output,
}


def _gym_instance(row: Mapping[str, Any]) -> dict:
    """The SWE-bench instance of a NeMo Gym SWE row: ``verifier_metadata.instance_dict``, the
    agent's ``responses_create_params.metadata`` (its ``instance_dict`` may be JSON text), or the
    row itself."""
    metadata = pluck(row, "responses_create_params.metadata")
    for candidate in (
        pluck(row, "verifier_metadata.instance_dict"),
        metadata.get("instance_dict") if isinstance(metadata, Mapping) else None,
        metadata if isinstance(metadata, Mapping) and "problem_statement" in metadata else None,
    ):
        if candidate is not None and candidate != "":
            instance = json_field(candidate, "instance_dict")
            if isinstance(instance, Mapping):
                return instance
    if "problem_statement" in row:
        return row
    raise NoReference("swe row without its instance (instance_dict or problem_statement)")


def nemo_gym(row: Mapping[str, Any], suffix: str = "", domain: str | None = None) -> dict:
    """One NeMo Gym row (NVIDIA's released RL data) as an RL row of its domain
    (:func:`gym_domain`), or a SWE instance."""
    domain = domain or gym_domain(row)
    if domain == "swe":
        return swebench(_gym_instance(row))
    if domain not in GYM_REFERENCES:
        raise RowError(f"no NeMo Gym reference fields for domain {domain!r}; known: {', '.join(GYM_REFERENCES)}")
    messages = _gym_messages(row)
    if suffix:
        messages[-1] = {**messages[-1], "content": with_suffix(messages[-1]["content"], suffix)}
    out: dict[str, Any] = {"prompt": messages, "domain": domain, **GYM_REFERENCES[domain](row)}
    tools = openai_tools(pluck(row, "responses_create_params.tools"))
    if tools:
        out["tools"] = tools
    identifier = row_id(row, "id", "hash_id", "uuid", "verifier_metadata.problem_id", "problem_id")
    if identifier is not None:
        out["id"] = identifier
    for name in ("source", "dataset"):
        if isinstance(row.get(name), str):
            out[name] = row[name]
    return out


def instruction_fields(ids: Any, kwargs: Any) -> dict:
    """IFEval-style ``instruction_id_list`` and ``kwargs`` as the ifeval reward reads them:
    either given as JSON text; ``kwargs`` absent or empty (no arguments), one entry per
    instruction (an entry null, a dict or JSON text of one; keys whose value is null dropped, as
    Parquet struct columns fill absent keys with nulls), or padded past the instructions with
    empty entries, which are cut. Unknown ids are malformed rows (they have no checker)."""
    ids = json_field(ids, "instruction_id_list")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or not ids:
        raise RowError("instruction_id_list is not a non-empty list of instruction ids")
    kwargs = json_field(kwargs, "kwargs") if kwargs is not None else []
    if not isinstance(kwargs, list):
        raise RowError("kwargs is not a list with one entry per instruction")
    entries = [_kwargs_entry(entry) for entry in kwargs] or [{} for _ in ids]
    if len(entries) > len(ids) and not any(entries[len(ids) :]):
        entries = entries[: len(ids)]
    if len(entries) != len(ids):
        raise RowError(f"kwargs has {len(kwargs)} entries for {len(ids)} instructions")
    from cascade_rl.rewards.ifeval import INSTRUCTIONS

    unknown = [i for i in ids if i not in INSTRUCTIONS]
    if unknown:  # no checker: every response would score 0 with an error, lowering the accuracy
        raise UnknownInstruction(f"unknown instruction id {unknown[0]!r} (no checker in cascade_rl.rewards.ifeval)")
    return {"instruction_id_list": list(ids), "kwargs": entries}


def _kwargs_entry(entry: Any) -> dict:
    entry = json_field(entry, "kwargs entry") if entry is not None else {}
    entry = {} if entry is None else entry
    if not isinstance(entry, Mapping):
        raise RowError("kwargs has an entry that is not an object")
    return {k: v for k, v in entry.items() if v is not None}


# ----------------------------------------------------------------------------- SFT and RM data
def messages_row(row: Mapping[str, Any], suffix: str = "") -> dict:
    """An OpenAI-style ``messages`` row (optional ``tools``) as an SFT row."""
    try:
        out = normalise_sft(dict(row))
    except ValueError as error:
        raise RowError(str(error)) from None
    if "tools" in out:
        out["tools"] = openai_tools(json.loads(out["tools"]))
    for name in ("id", "category", "domain"):
        if name in row and isinstance(row[name], (str, int)):
            out[name] = row[name]
    return out


def helpsteer(row: Mapping[str, Any], suffix: str = "") -> dict | Drop:
    """HelpSteer3 or HelpSteer2-preference pair as (prompt, chosen, rejected); ties dropped."""
    row = dict(row)
    if "preference_strength" in row:  # HelpSteer2: negative = response_1 is better
        row = {
            "context": row.get("prompt"),
            "response1": row.get("response_1"),
            "response2": row.get("response_2"),
            "overall_preference": row["preference_strength"],
        }
    if "overall_preference" not in row:
        raise RowError("missing field 'overall_preference' (HelpSteer3) / 'preference_strength' (HelpSteer2)")
    if row["overall_preference"] == 0:
        return Drop("tie (preference 0)")
    try:
        return normalise_preference(row)
    except ValueError as error:
        raise RowError(str(error)) from None


# ----------------------------------------------------------------------------- benchmarks
def aime(row: Mapping[str, Any], suffix: str = MATH_SUFFIX) -> dict:
    problem = need(row, "problem", "Problem", "question", "Question")
    answer = need(row, "answer", "Answer", "expected_answer")
    out = {"prompt": with_suffix(str(problem), suffix), "domain": "math", "answer": str(answer)}
    identifier = row_id(row, "id", "ID", "problem_id", "url")
    return {**out, "id": identifier} if identifier else out


def gsm8k(row: Mapping[str, Any], suffix: str = MATH_SUFFIX) -> dict:
    """A GSM8K problem: the number after ``####`` (thousands separators removed) is the answer;
    the worked solution before it, calculator annotations removed, is kept as ``solution``."""
    question = need(row, "question")
    text = need(row, "answer")
    if not isinstance(text, str) or "####" not in text:
        raise RowError("answer has no '#### <number>' line")
    worked, _, final = text.rpartition("####")
    answer = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", final.strip())
    if not GSM8K_NUMBER.fullmatch(answer):
        raise RowError(f"the answer after '####' is not a number: {final.strip()!r:.80}")
    out = {
        "prompt": with_suffix(str(question), suffix),
        "domain": "math",
        "answer": answer,
        "solution": GSM8K_CALCULATOR.sub("", worked).strip(),
    }
    identifier = row_id(row, "id", "ID")
    return {**out, "id": identifier} if identifier else out


def sft_pair(prompt: str, response: str, source: str, **reference: Any) -> dict:
    """An SFT row of one exchange; ``reference`` (a reward ``domain`` and its fields) lets
    ``cascade data verify`` check the response against the ground truth."""
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
    return {"messages": messages, "source": source, **reference}


def gsm8k_sft(row: Mapping[str, Any], suffix: str = MATH_SUFFIX) -> dict:
    """A GSM8K training solution as an SFT row: the worked solution (calculator annotations
    removed) ending in ``The answer is $\\boxed{N}$.``, the form the math verifier reads."""
    problem = gsm8k(row, suffix)
    response = f"{problem['solution']}\nThe answer is $\\boxed{{{problem['answer']}}}$."
    return sft_pair(problem["prompt"], response, "math", domain="math", answer=problem["answer"])


def ifeval(row: Mapping[str, Any], suffix: str = "") -> dict:
    prompt = need(row, "prompt")
    if not isinstance(prompt, str):
        raise RowError("prompt is not a string")
    out = {"prompt": with_suffix(prompt, suffix), "domain": "ifeval"}
    out.update(instruction_fields(need(row, "instruction_id_list"), row.get("kwargs")))
    identifier = row_id(row, "key", "id")
    return {**out, "id": identifier} if identifier else out


class _PlainDataUnpickler(pickle.Unpickler):
    """Unpickles plain data only (str, bytes, numbers, lists, dicts...: pickle opcodes that
    build no objects); any class or function reference is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: only plain data may be unpickled")


def decode_private_tests(value: Any) -> list:
    """LiveCodeBench's private test cases: a JSON list, JSON text of one, or that JSON text
    pickled, zlib-compressed and base64-encoded (the public dataset). Only plain data comes out."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str) or not value.strip():
        raise RowError("private_test_cases is not a list or a string")
    text = value.strip()
    if not text.startswith("["):
        try:
            raw = zlib.decompress(base64.b64decode(text, validate=True))
            text = _PlainDataUnpickler(io.BytesIO(raw)).load()
        except pickle.UnpicklingError as error:
            raise RowError(f"private_test_cases: {error}") from None
        except (ValueError, zlib.error, EOFError) as error:
            raise RowError(f"private_test_cases is neither JSON nor base64+zlib+pickle ({error})") from None
    decoded = json_field(text, "private_test_cases") if isinstance(text, str) else text
    if not isinstance(decoded, list):
        raise RowError("private_test_cases does not hold a list of tests")
    return decoded


def livecodebench(row: Mapping[str, Any], suffix: str = "", tests: str = "all") -> dict:
    """A LiveCodeBench problem with its public and private tests as one test suite."""
    question = need(row, "question_content")
    metadata = json_field(row.get("metadata") or {}, "metadata")
    cases = list(json_field(row.get("public_test_cases") or [], "public_test_cases"))
    if tests == "all":
        cases += decode_private_tests(row["private_test_cases"]) if row.get("private_test_cases") else []
    if not cases:
        raise RowError("no test cases (public_test_cases / private_test_cases)")
    if not all(isinstance(c, Mapping) and "input" in c and "output" in c for c in cases):
        raise RowError("a test case is not an object with input and output")
    functional = any(c.get("testtype") == "functional" for c in cases)
    fn_name = metadata.get("func_name") if isinstance(metadata, Mapping) else None
    if functional and not fn_name:
        raise RowError("functional tests but no metadata.func_name")
    suite = {
        "inputs": [c["input"] for c in cases],
        "outputs": [c["output"] for c in cases],
        "fn_name": fn_name if functional else None,
    }
    starter = (row.get("starter_code") or "").strip()
    instruction = CODE_CALL.format(starter=starter) if starter else CODE_STDIN
    out = {
        "prompt": with_suffix(with_suffix(str(question), instruction), suffix),
        "domain": "code",
        "tests": check_tests(suite, "tests"),
    }
    for name in ("question_id", "contest_date", "platform", "difficulty", "question_title", "contest_id"):
        if row.get(name) not in (None, ""):
            out[name] = row[name]
    if isinstance(metadata, Mapping) and metadata:
        out["metadata"] = dict(metadata)
    if "question_id" in out:
        out["id"] = str(out["question_id"])
    return out


def taco(row: Mapping[str, Any], suffix: str = "") -> dict | Drop:
    """A TACO / APPS problem: ``input_output`` JSON with inputs, outputs and maybe fn_name."""
    question = need(row, "question")
    suite = json_field(need(row, "input_output"), "input_output")
    if not isinstance(suite, Mapping):
        raise RowError("input_output is not an object with inputs and outputs")
    if not suite.get("inputs"):
        return Drop("no tests")
    suite = {"inputs": suite.get("inputs"), "outputs": suite.get("outputs"), "fn_name": suite.get("fn_name")}
    starter = (row.get("starter_code") or "").strip()
    instruction = CODE_CALL.format(starter=starter) if starter else CODE_STDIN
    out = {
        "prompt": with_suffix(with_suffix(str(question), instruction), suffix),
        "domain": "code",
        "tests": check_tests(suite, "input_output"),
    }
    solutions = json_field(row.get("solutions") or [], "solutions")
    if not isinstance(solutions, list) or not all(isinstance(v, str) for v in solutions):
        raise RowError("solutions is not a list of programs")
    if solutions:
        out["solutions"] = solutions[:KEPT_SOLUTIONS]
    for name in ("url", "source"):
        if isinstance(row.get(name), str) and row[name].strip():
            out[name] = row[name].strip()
    identifier = row_id(row, "id", "problem_id", "name")
    return {**out, "id": identifier} if identifier else out


def _statements(value: Any, what: str) -> list[str]:
    value = json_field(value, what) if isinstance(value, str) and value.lstrip().startswith("[") else value
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RowError(f"{what} is not a list of Python statements")
    return list(value)


def mbpp(row: Mapping[str, Any], suffix: str = "", split: str = "all") -> dict | Drop:
    """An MBPP problem: ``test_list`` and ``challenge_test_list`` as assert-style tests run
    after ``test_setup_code``; the prompt states the task and shows the first test (the
    function's name and signature). ``split``: MBPP's split by task_id, or ``all``."""
    if split != "all" and split not in MBPP_SPLITS:
        raise RowError(f"split must be all or one of {', '.join(MBPP_SPLITS)}, got {split!r}")
    text = need(row, "text", "prompt")
    task_id = need(row, "task_id")
    if split != "all":
        try:
            number = int(task_id)
        except (TypeError, ValueError):
            raise RowError(f"task_id is not a number: {task_id!r:.40}") from None
        if number not in MBPP_SPLITS[split]:
            return Drop(f"not in the {split} split")
    asserts = _statements(need(row, "test_list"), "test_list")
    asserts += _statements(row.get("challenge_test_list") or [], "challenge_test_list")
    setup = row.get("test_setup_code") or ""
    if not isinstance(setup, str):
        raise RowError("test_setup_code is not a string")
    setup = setup.replace("\r\n", "\n")
    tests = {"asserts": asserts, **({"setup": setup} if setup.strip() else {})}
    shown = f"Your code should pass this test:\n```python\n{asserts[0]}\n```"
    if setup.strip():
        shown += f"\nThe tests run after this code, which follows your program:\n```python\n{setup.strip()}\n```"
    out = {
        "prompt": with_suffix(with_suffix(f"{str(text).strip()}\n{shown}", CODE_FUNCTION), suffix),
        "domain": "code",
        "tests": check_tests(tests, "tests"),
        "id": str(task_id),
    }
    code = row.get("code")
    if isinstance(code, str) and code.strip():
        out["solutions"] = [code.replace("\r\n", "\n")]
    return out


def mbpp_sft(row: Mapping[str, Any], suffix: str = "", split: str = "train") -> dict | Drop:
    """An MBPP reference solution (``code``) as an SFT row: the RL row's prompt, the solution in
    a python block (what the code reward runs); ``split`` as for ``mbpp`` (default: train)."""
    problem = mbpp(row, suffix, split)
    if isinstance(problem, Drop):
        return problem
    code = need(row, "code")
    if not isinstance(code, str) or not code.strip():
        raise RowError("code is not a reference solution")
    response = "```python\n" + code.replace("\r\n", "\n").strip() + "\n```"
    return sft_pair(problem["prompt"], response, "code", domain="code", tests=problem["tests"], id=problem["id"])


def humaneval(row: Mapping[str, Any], suffix: str = "") -> dict:
    """A HumanEval problem: the model completes the prompt's function and gives it whole, as a
    standalone program; the prompt's code runs before it (its imports and helper functions),
    then ``test`` and ``check(entry_point)``."""
    prompt = need(row, "prompt")
    entry_point = need(row, "entry_point")
    test = need(row, "test")
    if not all(isinstance(v, str) for v in (prompt, entry_point, test)):
        raise RowError("prompt, test and entry_point must be strings")
    if not entry_point.isidentifier():
        raise RowError(f"entry_point is not a Python identifier: {entry_point!r:.80}")
    tests = {"asserts": [f"check({entry_point})"], "prelude": prompt, "setup": test}
    out = {
        "prompt": with_suffix(HUMANEVAL_TASK.format(prompt=prompt.strip("\n")), suffix),
        "domain": "code",
        "tests": check_tests(tests, "tests"),
    }
    identifier = row_id(row, "task_id", "id")
    return {**out, "id": identifier} if identifier else out


def mcq(row: Mapping[str, Any], suffix: str = CHOICE_SUFFIX) -> dict:
    """MMLU, MMLU-Pro or GPQA as a multiple-choice row with lettered options."""
    question = need(row, "question", "Question")
    if "Correct Answer" in row:  # GPQA: the right answer is a text among four
        correct = str(row["Correct Answer"]).strip()
        options = [correct] + [
            str(row[f"Incorrect Answer {i}"]).strip() for i in (1, 2, 3) if row.get(f"Incorrect Answer {i}")
        ]
        seed = row_id(row, "Record ID", "id") or str(question)
        random.Random(hashlib.sha256(seed.encode()).hexdigest()).shuffle(options)
        gold = options.index(correct)
    else:
        options = need(row, "options", "choices")
        if not isinstance(options, list) or len(options) < 2:
            raise RowError("options / choices is not a list of at least two options")
        gold = _gold_index(row, len(options))
    if len(options) > 26:
        raise RowError("more than 26 options")
    lines = "\n".join(f"{string.ascii_uppercase[i]}) {option}" for i, option in enumerate(options))
    out = {
        "prompt": with_suffix(f"{question}\n\n{lines}", suffix),
        "domain": "multiple_choice",
        "answer": string.ascii_uppercase[gold],
        "choices": [str(option) for option in options],
    }
    for name in ("subject", "category", "src"):
        if isinstance(row.get(name), str):
            out[name] = row[name]
    identifier = row_id(row, "question_id", "Record ID", "id")
    return {**out, "id": identifier} if identifier else out


def _gold_index(row: Mapping[str, Any], count: int) -> int:
    answer = row.get("answer_index", row.get("answer"))
    if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().upper() in string.ascii_uppercase:
        index = string.ascii_uppercase.index(answer.strip().upper())
    elif isinstance(answer, int) and not isinstance(answer, bool):
        index = answer
    else:
        raise RowError(f"answer is neither an option letter nor an index: {answer!r}")
    if not 0 <= index < count:
        raise RowError(f"answer {answer!r} is not one of the {count} options")
    return index


def bfcl_schema(value: Any) -> Any:
    """A BFCL parameter schema with its types as JSON schema types (``dict`` -> ``object``)."""
    if isinstance(value, Mapping):
        out = {k: bfcl_schema(v) for k, v in value.items()}
        if isinstance(out.get("type"), str):
            out["type"] = BFCL_TYPES.get(out["type"].lower(), out["type"])
        return out
    if isinstance(value, list):
        return [bfcl_schema(v) for v in value]
    return value


def bfcl(row: Mapping[str, Any], suffix: str = "", answers: Mapping[str, Any] | None = None) -> dict | Drop:
    """A BFCL row: its functions become the row's tools; its ground truth (the row's, or the
    ``--answers`` file's by id) the expected calls, several acceptable values per argument."""
    question = need(row, "question")
    turns = question
    if isinstance(question, list) and question and isinstance(question[0], list):
        if len(question) > 1:
            return Drop("multi-turn BFCL entry (one request per row is supported)")
        turns = question[0]
    try:
        prompt = as_messages(turns, "question")
    except ValueError as error:
        raise RowError(str(error)) from None
    functions = need(row, "function")
    functions = functions if isinstance(functions, list) else [functions]
    tools = openai_tools([bfcl_schema(f) for f in functions])
    identifier = row_id(row, "id")
    truth = row.get("ground_truth")
    if truth is None and answers is not None and identifier in answers:
        truth = answers[identifier]
    if truth is None:
        if identifier and identifier.startswith("irrelevance"):
            truth = []  # no function fits: the model must not call one
        else:
            raise RowError("no ground truth: add 'ground_truth' or pass the possible-answer file with --answers")
    if not isinstance(truth, list):
        raise RowError("ground_truth is not a list of calls")
    out = {"prompt": prompt, "domain": "tool_call", "tools": tools, "expected_calls": truth}
    if suffix:
        out["prompt"][-1]["content"] = with_suffix(out["prompt"][-1]["content"], suffix)
    return {**out, "id": identifier} if identifier else out


def swebench(row: Mapping[str, Any], suffix: str = "") -> dict:
    """A SWE-bench instance, validated and with its test lists decoded, for ``cascade swe``."""
    from cascade_rl.swe.pipeline import InstanceError, SweInstance

    try:
        instance = SweInstance.from_dict(row)
    except InstanceError as error:
        raise RowError(str(error)) from None
    out = {
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "base_commit": instance.base_commit,
        "problem_statement": instance.problem_statement,
        "patch": instance.patch,
        "test_patch": instance.test_patch,
        "FAIL_TO_PASS": instance.fail_to_pass,
        "PASS_TO_PASS": instance.pass_to_pass,
    }
    for name in ("version", "created_at", "hints_text", "environment_setup_commit"):
        if row.get(name) not in (None, ""):
            out[name] = row[name]
    return out
