"""``cascade data convert``: field mappings from the public formats of the paper's data and
benchmarks to the project's schemas (docs/data-formats.md; SPEC sections 3, 4, 6 and 9).

Each format is a function ``row -> dict`` (or :class:`~cascade_rl.data.job.Drop` for a row the
format itself excludes, such as a HelpSteer tie) that raises
:class:`~cascade_rl.data.rows.RowError` naming the field when a row does not have the format's
shape. Samples of every format, written in the public schema, are in
``tests/data/samples/`` (docs/data-formats.md lists the fields read).

Formats (the fields read are listed in docs/data-formats.md):

* ``nemo-gym``: NVIDIA's RL data in the NeMo Gym layout (``responses_create_params.input``
  and ``tools``; ``expected_answer`` (math_with_code: ``expected_result``),
  ``verifier_metadata.unit_tests``, ``instruction_id_list``
  / ``kwargs``, ``verifier_metadata.instance_dict``) -> math / code / ifeval RL rows, tools
  kept; SWE rows -> instances;
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

**Why one file of about 670 lines** (DESIGN.md: files over ~500 lines say why): one
converter function per public format listed above (plus :data:`FORMATS`, their registry), each
independent of the others; one file is one table of formats to read and to extend.
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
from dataclasses import dataclass
from typing import Any

from cascade_rl.data.constrain.files import constrain
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


@dataclass(frozen=True)
class Format:
    name: str
    convert: Callable[..., dict | Drop]
    writes: str
    suffix: str = ""


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


def _json_field(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise RowError(f"{what} is not valid JSON ({error.msg})") from None
    return value


def _row_id(row: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = pluck(row, name)
        if value is not None and value != "":
            return str(value)
    return None


def _check_tests(tests: dict, what: str) -> dict:
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


def _gym_domain(row: Mapping[str, Any]) -> str:
    if pluck(row, "verifier_metadata.instance_dict") is not None or "problem_statement" in row:
        return "swe"
    if pluck(row, "verifier_metadata.unit_tests") is not None or "unit_tests" in row:
        return "code"
    if pluck(row, "verifier_metadata.instruction_id_list") is not None or "instruction_id_list" in row:
        return "ifeval"
    if any(pluck(row, name) is not None for name in GYM_ANSWER_FIELDS):
        return "math"
    raise RowError(
        "no verifier fields: expected_answer (or expected_result), verifier_metadata.unit_tests, "
        "instruction_id_list or verifier_metadata.instance_dict"
    )


#: where NeMo Gym rows keep a math answer; ``expected_result`` is the math_with_code resources
#: server's name for it (at the top level, as that server reads it, or in verifier_metadata)
GYM_ANSWER_FIELDS = (
    "expected_answer",
    "verifier_metadata.expected_answer",
    "expected_result",
    "verifier_metadata.expected_result",
)


def nemo_gym(row: Mapping[str, Any], suffix: str = "", domain: str | None = None) -> dict:
    """One NeMo Gym row (NVIDIA's released RL data) as an RL row, or a SWE instance."""
    domain = domain or _gym_domain(row)
    if domain == "swe":
        instance = pluck(row, "verifier_metadata.instance_dict") or row
        return swebench(instance if isinstance(instance, Mapping) else row)
    messages = _gym_messages(row)
    if suffix:
        messages[-1] = {**messages[-1], "content": with_suffix(messages[-1]["content"], suffix)}
    out: dict[str, Any] = {"prompt": messages, "domain": domain}
    if domain == "math":
        out["answer"] = str(need(row, *GYM_ANSWER_FIELDS))
    elif domain == "code":
        tests = _json_field(need(row, "verifier_metadata.unit_tests", "unit_tests"), "unit_tests")
        if not isinstance(tests, Mapping):
            raise RowError("unit_tests is not an object with inputs and outputs")
        out["tests"] = _check_tests(dict(tests), "unit_tests")
    elif domain == "ifeval":
        ids = need(row, "verifier_metadata.instruction_id_list", "instruction_id_list")
        kwargs = pluck(row, "verifier_metadata.kwargs", pluck(row, "kwargs"))
        out.update(_instructions(ids, kwargs))
    tools = openai_tools(pluck(row, "responses_create_params.tools"))
    if tools:
        out["tools"] = tools
    identifier = _row_id(row, "id", "hash_id", "verifier_metadata.problem_id", "problem_id")
    if identifier is not None:
        out["id"] = identifier
    for name in ("source", "dataset"):
        if isinstance(row.get(name), str):
            out[name] = row[name]
    return out


def _instructions(ids: Any, kwargs: Any) -> dict:
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or not ids:
        raise RowError("instruction_id_list is not a non-empty list of instruction ids")
    kwargs = _json_field(kwargs, "kwargs") if kwargs is not None else [{}] * len(ids)
    if not isinstance(kwargs, list) or len(kwargs) != len(ids):
        raise RowError("kwargs is not a list with one entry per instruction")
    from cascade_rl.rewards.ifeval import INSTRUCTIONS

    unknown = [i for i in ids if i not in INSTRUCTIONS]
    if unknown:  # no checker: every response would score 0 with an error, lowering the accuracy
        raise RowError(f"unknown instruction id {unknown[0]!r} (no checker in cascade_rl.rewards.ifeval)")
    cleaned = []
    for entry in kwargs:
        entry = _json_field(entry, "kwargs entry") if entry is not None else {}
        if not isinstance(entry, Mapping):
            raise RowError("kwargs has an entry that is not an object")
        cleaned.append({k: v for k, v in entry.items() if v is not None})
    return {"instruction_id_list": list(ids), "kwargs": cleaned}


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
    identifier = _row_id(row, "id", "ID", "problem_id", "url")
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
    identifier = _row_id(row, "id", "ID")
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
    out.update(_instructions(need(row, "instruction_id_list"), row.get("kwargs")))
    identifier = _row_id(row, "key", "id")
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
    decoded = _json_field(text, "private_test_cases") if isinstance(text, str) else text
    if not isinstance(decoded, list):
        raise RowError("private_test_cases does not hold a list of tests")
    return decoded


def livecodebench(row: Mapping[str, Any], suffix: str = "", tests: str = "all") -> dict:
    """A LiveCodeBench problem with its public and private tests as one test suite."""
    question = need(row, "question_content")
    metadata = _json_field(row.get("metadata") or {}, "metadata")
    cases = list(_json_field(row.get("public_test_cases") or [], "public_test_cases"))
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
        "tests": _check_tests(suite, "tests"),
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
    suite = _json_field(need(row, "input_output"), "input_output")
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
        "tests": _check_tests(suite, "input_output"),
    }
    solutions = _json_field(row.get("solutions") or [], "solutions")
    if not isinstance(solutions, list) or not all(isinstance(v, str) for v in solutions):
        raise RowError("solutions is not a list of programs")
    if solutions:
        out["solutions"] = solutions[:KEPT_SOLUTIONS]
    for name in ("url", "source"):
        if isinstance(row.get(name), str) and row[name].strip():
            out[name] = row[name].strip()
    identifier = _row_id(row, "id", "problem_id", "name")
    return {**out, "id": identifier} if identifier else out


def _statements(value: Any, what: str) -> list[str]:
    value = _json_field(value, what) if isinstance(value, str) and value.lstrip().startswith("[") else value
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
        "tests": _check_tests(tests, "tests"),
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
        "tests": _check_tests(tests, "tests"),
    }
    identifier = _row_id(row, "task_id", "id")
    return {**out, "id": identifier} if identifier else out


def mcq(row: Mapping[str, Any], suffix: str = CHOICE_SUFFIX) -> dict:
    """MMLU, MMLU-Pro or GPQA as a multiple-choice row with lettered options."""
    question = need(row, "question", "Question")
    if "Correct Answer" in row:  # GPQA: the right answer is a text among four
        correct = str(row["Correct Answer"]).strip()
        options = [correct] + [
            str(row[f"Incorrect Answer {i}"]).strip() for i in (1, 2, 3) if row.get(f"Incorrect Answer {i}")
        ]
        seed = _row_id(row, "Record ID", "id") or str(question)
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
    identifier = _row_id(row, "question_id", "Record ID", "id")
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
    identifier = _row_id(row, "id")
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


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("nemo-gym", nemo_gym, "RL rows (math, code, ifeval; tools kept) or SWE instances"),
        Format("messages", messages_row, "SFT rows"),
        Format("helpsteer", helpsteer, "reward-model pairs (ties dropped)"),
        Format("aime", aime, "math RL rows", MATH_SUFFIX),
        Format("gsm8k", gsm8k, "math RL rows, worked solution kept (GSM8K)", MATH_SUFFIX),
        Format("ifeval", ifeval, "ifeval RL rows (IFEval and IFBench)"),
        Format("livecodebench", livecodebench, "code RL rows (public + private tests)"),
        Format("taco", taco, "code RL rows (TACO / APPS)"),
        Format("mbpp", mbpp, "code RL rows with assert tests (MBPP; --split)"),
        Format("gsm8k-sft", gsm8k_sft, "SFT rows: GSM8K worked solutions ending in \\boxed{answer}", MATH_SUFFIX),
        Format("mbpp-sft", mbpp_sft, "SFT rows: MBPP reference solutions in a python block (--split, train)"),
        Format("humaneval", humaneval, "code RL rows with assert tests (HumanEval)"),
        Format("mcq", mcq, "multiple_choice RL rows (MMLU, MMLU-Pro, GPQA)", CHOICE_SUFFIX),
        Format("bfcl", bfcl, "tool_call RL rows with their tools"),
        Format("swebench", swebench, "SWE instances for cascade swe"),
        Format("constrain", constrain, "ifeval RL rows: the text plus drawn constraints (cascade data constrain)"),
    )
}
FORMATS["ifbench"] = FORMATS["ifeval"]
FORMATS["apps"] = FORMATS["taco"]


def converted(
    name: str | None,
    options: Mapping[str, Any],
    normalise: Callable[[dict], dict],
    *,
    where: str,
    resolve: Callable[[str], Any] = str,
) -> Callable[[dict], dict]:
    """``normalise`` applied to each row after the public format ``name``'s converter (the
    converters of ``cascade data convert``; ``None``: no conversion), for a recipe's data source
    or benchmark named ``where``. A row the converter drops or finds malformed raises ValueError
    with the converter's reason (the loaders count and skip it). Unknown formats and options
    fail at once, naming ``where``; ``answers`` (BFCL) is read through ``resolve``."""
    if name is None:
        return normalise
    import inspect

    if name not in FORMATS:
        raise ValueError(f"{where}: unknown format {name!r}; known: {', '.join(FORMATS)}")
    spec = FORMATS[name]
    options = {"suffix": spec.suffix, **options}
    accepted = set(inspect.signature(spec.convert).parameters) - {"row"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValueError(f"{where}: format {spec.name} takes no option {unknown[0]!r}; options: {sorted(accepted)}")
    if "answers" in options:
        path = resolve(str(options["answers"]))
        if not path.is_file():
            raise FileNotFoundError(f"{where}: answers file not found: {path}")
        options["answers"] = load_answers(path)

    def normalise_converted(row: dict) -> dict:
        result = spec.convert(row, **options)  # a RowError is a ValueError: the row is skipped
        if isinstance(result, Drop):
            raise ValueError(result.reason)
        return normalise(result)

    return normalise_converted


def load_answers(path: Any) -> dict[str, Any]:
    """BFCL possible answers (``{"id", "ground_truth"}`` per line), by id."""
    from cascade_rl.data.rows import iter_rows

    return {str(row.data["id"]): row.data.get("ground_truth") for row in iter_rows(path) if "id" in row.data}
