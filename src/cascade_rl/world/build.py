"""Build the toy world: every data file of the embedded default plus its tokenizer (issue 4).

:func:`build_world` writes, into one directory:

=========================  =====================================================================
``sft.jsonl``              SFT rows (``messages``, optional ``tools``, ``source``): general chat in
                           both modes, instruction following, math / code in thinking mode, tool
                           calls, SWE localisation / repair / test generation
``rm_pairs.jsonl``         preference pairs (``prompt``, ``chosen``, ``rejected``) for the reward model
``rl_rlhf.jsonl``          RLHF prompts (domain ``preference``), drawn from the pairs' prompts
``rl_ifrl.jsonl``          IF-RL prompts (domain ``ifeval``)
``rl_math.jsonl``          math prompts (domain ``math``, ``answer``)
``rl_code.jsonl``          code prompts (domain ``code``, ``tests``)
``rl_swe.jsonl``           repair prompts (domain ``swe``, ``files``, ``golden_patch``)
``sft_judge.jsonl``        judge-format SFT rows for a toy generative reward model, both orders of
                           the first ``sft_judge`` preference pairs (:mod:`.judge`; only when asked
                           for)
``bench_<name>.jsonl``     held-out benchmarks: toy-ifeval, toy-math, toy-code, toy-swe, toy-arena,
                           tool-call; toy-workplace, toy-structured, toy-mcqa when their sizes are set
``rl_workplace.jsonl``,    the multi-domain stage's prompts (office episodes, structured output,
``rl_structured.jsonl``,   multiple choice), written when their sizes are set
``rl_mcqa.jsonl``
``tokenizer/``             the byte-level BPE tokenizer trained on the training files
``manifest.json``          seed, sizes, row counts, SHA-256 of every file, the benchmarks' domains
                           and thinking modes, and what decontamination dropped
=========================  =====================================================================

Hygiene (SPEC section 3): test rows are drawn first; a training candidate (SFT, reward-model
or RL) is rejected when it shares a 9-gram with any test row (:mod:`.decontam`) and when its
prompt was already used, so benchmark prompts are unseen and SFT and RL prompts are strictly
disjoint. Generation is seeded per file: the same seed gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from cascade_rl.chat import render
from cascade_rl.world import arithmetic, choice, general, instructions, judge, office, programs, structured, swe, tools
from cascade_rl.world.decontam import Decontaminator, row_text, strip_scaffolding
from cascade_rl.world.near_miss import DEFAULT_DOMAINS as DEFAULT_NEAR_MISS_DOMAINS
from cascade_rl.world.near_miss import DOMAINS as NEAR_MISS_DOMAINS
from cascade_rl.world.near_miss import near_miss
from cascade_rl.world.tasks import Task, rl_row, sft_row

MANIFEST_VERSION = 1
#: Every n-th instruction-following SFT prompt also gets a thinking-mode row.
IFEVAL_THINK_EVERY = 3


@dataclass(frozen=True)
class WorldSizes:
    """How many rows of each kind the world holds (SFT counts are prompts; general chat and
    instruction-following prompts give a thinking and a non-thinking row each)."""

    sft_general: int = 500
    sft_ifeval: int = 1000
    sft_math: int = 3000
    sft_code: int = 1000
    sft_tool: int = 600
    sft_swe_repair: int = 1000
    sft_swe_localization: int = 40
    sft_swe_testgen: int = 20
    rm_pairs: int = 1200
    rl_rlhf: int = 256
    rl_ifrl: int = 256
    rl_math: int = 512
    rl_code: int = 256
    rl_swe: int = 128
    bench_arena: int = 32
    bench_ifeval: int = 64
    bench_math: int = 64
    bench_code: int = 64
    bench_swe: int = 32
    bench_tool: int = 48
    #: multi-domain tasks (issue 44; off by default, so the default world is unchanged): the toy
    #: office's tool episodes (domain ``workplace``), structured output (``structured_output``)
    #: and multiple choice (``mcqa``)
    sft_workplace: int = 0
    sft_structured: int = 0
    sft_mcqa: int = 0
    rl_workplace: int = 0
    rl_structured: int = 0
    rl_mcqa: int = 0
    bench_workplace: int = 0
    bench_structured: int = 0
    bench_mcqa: int = 0
    #: judge-format SFT rows (issue 45; off by default): both orders of the first ``sft_judge``
    #: preference pairs, for a toy pairwise GenRM (:mod:`.judge`); at most ``rm_pairs``
    sft_judge: int = 0
    vocab_size: int = 2048

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, int] | None) -> WorldSizes:
        values = _known_fields(cls, overrides)
        bad = [name for name, value in values.items() if not isinstance(value, int) or value < 0]
        if bad:
            raise ValueError(f"WorldSizes.{bad[0]} must be a non-negative integer, got {values[bad[0]]!r}")
        return cls(**values)

    def __post_init__(self) -> None:
        if self.sft_judge > self.rm_pairs:
            raise ValueError(
                f"WorldSizes.sft_judge ({self.sft_judge}) takes that many preference pairs; rm_pairs is {self.rm_pairs}"
            )


@dataclass(frozen=True)
class BenchmarkInfo:
    """A held-out benchmark: its file, reward domain, the thinking mode to evaluate it in, and
    how it is scored (``verify``: reward >= 1 is correct; ``arena``: reward-model win rate)."""

    name: str
    file: str
    domain: str
    mode: str
    kind: str
    rows: int


@dataclass
class WorldManifest:
    out_dir: Path
    seed: int
    sizes: WorldSizes
    options: WorldOptions
    rows: dict[str, int] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)
    benchmarks: dict[str, BenchmarkInfo] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    tokenizer_dir: str = "tokenizer"

    def path(self, name: str) -> Path:
        """The path of a world file by name (``sft.jsonl``) or benchmark name (``toy-math``)."""
        if name in self.benchmarks:
            return self.out_dir / self.benchmarks[name].file
        return self.out_dir / name

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MANIFEST_VERSION,
            "seed": self.seed,
            "sizes": asdict(self.sizes),
            "options": asdict(self.options),
            "rows": self.rows,
            "sha256": self.sha256,
            "tokenizer": self.tokenizer_dir,
            "benchmarks": {k: asdict(v) for k, v in self.benchmarks.items()},
            "decontamination": {"n": 9, "dropped": self.dropped},
        }

    @classmethod
    def load(cls, out_dir: str | Path) -> WorldManifest:
        out_dir = Path(out_dir)
        data = json.loads((out_dir / "manifest.json").read_text())
        return cls(
            out_dir,
            data["seed"],
            WorldSizes(**data["sizes"]),
            WorldOptions(**data["options"]),
            data["rows"],
            data["sha256"],
            {k: BenchmarkInfo(**v) for k, v in data["benchmarks"].items()},
            data["decontamination"]["dropped"],
            data["tokenizer"],
        )


#: name -> (file, domain, evaluation mode, kind)
BENCHMARKS = {
    "toy-arena": ("bench_toy-arena.jsonl", "preference", "no_think", "arena"),
    "toy-ifeval": ("bench_toy-ifeval.jsonl", "ifeval", "no_think", "verify"),
    "toy-math": ("bench_toy-math.jsonl", "math", "think", "verify"),
    "toy-code": ("bench_toy-code.jsonl", "code", "think", "verify"),
    "toy-swe": ("bench_toy-swe.jsonl", "swe", "think", "verify"),
    "tool-call": ("bench_tool-call.jsonl", "tool_call", "no_think", "verify"),
}
#: benchmarks written (and listed in the manifest) only when their size is not 0
OPTIONAL_BENCHMARKS = {
    "toy-workplace": ("bench_toy-workplace.jsonl", "workplace", "no_think", "verify"),
    "toy-structured": ("bench_toy-structured.jsonl", "structured_output", "no_think", "verify"),
    "toy-mcqa": ("bench_toy-mcqa.jsonl", "mcqa", "no_think", "verify"),
}


def scaffolding() -> list[str]:
    """Fixed text shared by every instance of a prompt family (see :mod:`.decontam`): the
    SWE prompt wrappers (both styles), the instruction descriptions of the toy world and the
    fixed phrases of its structured-output and multiple-choice requests."""
    import string

    pieces: list[str] = []
    for template in swe.prompt_templates() + swe.generator_templates():
        pieces += [literal for literal, *_ in string.Formatter().parse(template) if literal.strip()]
    pieces += instructions.all_descriptions()
    pieces += [*structured.SCAFFOLDING, *choice.SCAFFOLDING]
    return pieces


class Sampler:
    """Draws unique, decontaminated tasks from a generator: a candidate whose prompt was
    used before (anywhere in the world's training data) or whose text shares a 9-gram with
    a test row is rejected and counted."""

    def __init__(self, index: Decontaminator, fixed: list[str]) -> None:
        self.index, self.fixed = index, fixed
        self.used_prompts: set[str] = set()
        self.dropped: dict[str, int] = {}

    def clean(self, row: Mapping[str, Any]) -> bool:
        return not self.index.contaminated(strip_scaffolding(row_text(row), self.fixed))

    def draw(
        self,
        name: str,
        generator: Callable[[random.Random], Task],
        rng: random.Random,
        count: int,
        to_row: Callable[[Task], dict],
        *,
        unique: bool = True,
    ) -> Iterator[Task]:
        drawn, tries = 0, 0
        while drawn < count:
            tries += 1
            if tries > 50 * count + 1000:
                raise RuntimeError(
                    f"{name}: only {drawn} of {count} unique clean tasks after {tries} draws; ask for fewer"
                )
            task = generator(rng)
            key = _prompt_key(task)
            if unique and key in self.used_prompts:
                continue
            if not self.clean(to_row(task)):
                self.dropped[name] = self.dropped.get(name, 0) + 1
                continue
            self.used_prompts.add(key)
            drawn += 1
            yield task


def _prompt_key(task: Task) -> str:
    """What makes two prompts the same prompt: their user turns (the tools shown or a mode
    flag do not make a request new)."""
    return _user_turns(task.prompt)


def _row_prompt_key(row: Mapping[str, Any]) -> str:
    return _user_turns(row["prompt"])


def _user_turns(messages: Iterable[Mapping[str, Any]]) -> str:
    return json.dumps([m["content"] for m in messages if m["role"] == "user"])


def _rng(seed: int, name: str) -> random.Random:
    return random.Random(f"cascade-toy-world:{seed}:{name}")


@dataclass(frozen=True)
class WorldOptions:
    """How tasks are shaped. ``swe_prompt``: ``agentless`` (the paper's appendix C.2 prompts)
    or ``compact`` (same inputs and answer format, without the repeated instructions; what a
    few-million-parameter model can learn in minutes); ``math_style``: ``count`` or ``column``
    traces (:mod:`.arithmetic`); ``sft_near_miss``: the share of the SFT answers of the
    ``near_miss_domains`` (math, code, instruction following, general chat; SWE repair when
    named) written in a near-miss form that loses the reward (:mod:`.near_miss`; 0 = clean SFT
    data); ``mcqa_answer``: the non-thinking multiple-choice SFT answer, ``letter`` (the boxed
    letter alone) or ``check`` (the options checked in order first: :mod:`.choice`)."""

    swe_prompt: swe.PromptStyle = "agentless"
    math_style: arithmetic.Style = "count"
    sft_near_miss: float = 0.0
    near_miss_domains: tuple[str, ...] = DEFAULT_NEAR_MISS_DOMAINS
    mcqa_answer: choice.AnswerStyle = "letter"

    def __post_init__(self) -> None:
        if self.swe_prompt not in swe.PROMPT_STYLES:
            raise ValueError(f"swe_prompt must be one of {swe.PROMPT_STYLES}, got {self.swe_prompt!r}")
        if self.math_style not in ("count", "column"):
            raise ValueError(f"math_style must be 'count' or 'column', got {self.math_style!r}")
        if not 0.0 <= self.sft_near_miss <= 1.0:
            raise ValueError(f"sft_near_miss must be a share in [0, 1], got {self.sft_near_miss!r}")
        if self.mcqa_answer not in choice.ANSWER_STYLES:
            raise ValueError(f"mcqa_answer must be one of {choice.ANSWER_STYLES}, got {self.mcqa_answer!r}")
        object.__setattr__(self, "near_miss_domains", tuple(self.near_miss_domains))
        unknown = sorted(set(self.near_miss_domains) - set(NEAR_MISS_DOMAINS))
        if unknown:
            raise ValueError(f"near_miss_domains: unknown {unknown}; known: {', '.join(NEAR_MISS_DOMAINS)}")

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, Any] | None) -> WorldOptions:
        return cls(**_known_fields(cls, overrides))


def _known_fields(cls: type, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``overrides`` as a dict, after checking that every name is a field of dataclass ``cls``."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(overrides or {}) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return dict(overrides or {})


class Generators:
    """The world's task generators, shaped by its options."""

    def __init__(self, options: WorldOptions) -> None:
        self.options = options

    chat = staticmethod(general.chat_task)
    ifeval = staticmethod(instructions.if_task)
    code = staticmethod(programs.code_task)
    tool = staticmethod(tools.tool_task)
    structured = staticmethod(structured.structured_task)

    def choice(self, rng: random.Random) -> Task:
        return choice.choice_task(rng, answer_style=self.options.mcqa_answer)

    def math(self, rng: random.Random) -> Task:
        return arithmetic.math_task(rng, style=self.options.math_style)

    def repair(self, rng: random.Random) -> Task:
        return swe.repair_task(rng, swe.swe_instance(rng), prompt_style=self.options.swe_prompt)

    def localize(self, rng: random.Random) -> Task:
        return swe.localization_task(swe.swe_instance(rng), prompt_style=self.options.swe_prompt)

    def testgen(self, rng: random.Random) -> Task:
        return swe.test_generation_task(swe.swe_instance(rng), prompt_style=self.options.swe_prompt)


def build_world(
    out_dir: str | Path, *, seed: int = 0, sizes: WorldSizes | None = None, options: WorldOptions | None = None
) -> WorldManifest:
    """Generate the toy world into ``out_dir`` (created if needed) and return its manifest."""
    sizes, options = sizes or WorldSizes(), options or WorldOptions()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[dict]] = {}
    generators = Generators(options)

    benches = _benchmarks(seed, sizes, generators)
    fixed = scaffolding()
    index = Decontaminator(strip_scaffolding(row_text(row), fixed) for rows in benches.values() for row in rows)
    sampler = Sampler(index, fixed)
    for rows in benches.values():
        sampler.used_prompts.update(_row_prompt_key(row) for row in rows)

    office_sets = _office_rows(seed, sizes, options)
    benches["toy-workplace"] = office_sets.pop("bench")
    files["sft.jsonl"] = _sft_rows(seed, sizes, sampler, generators, office_sets.pop("sft"))
    files["rm_pairs.jsonl"], rlhf_pool = _preference_rows(seed, sizes, sampler)
    files.update(_rl_rows(seed, sizes, sampler, rlhf_pool, generators))
    if office_sets["rl"]:
        files["rl_workplace.jsonl"] = office_sets["rl"]
    if sizes.sft_judge:
        files["sft_judge.jsonl"] = judge.judge_rows(files["rm_pairs.jsonl"][: sizes.sft_judge])
    listed = {**BENCHMARKS, **{k: v for k, v in OPTIONAL_BENCHMARKS.items() if benches.get(k)}}
    for name, (file_name, *_) in listed.items():
        files[file_name] = benches[name]

    manifest = WorldManifest(out, seed, sizes, options, dropped=dict(sorted(sampler.dropped.items())))
    for file_name, rows in files.items():
        manifest.sha256[file_name] = _write_jsonl(out / file_name, rows)
        manifest.rows[file_name] = len(rows)
    for name, (file_name, domain, mode, kind) in listed.items():
        manifest.benchmarks[name] = BenchmarkInfo(name, file_name, domain, mode, kind, len(benches[name]))
    from cascade_rl.world.tokenizer import build_tokenizer  # transformers: only when a world is built

    build_tokenizer(_tokenizer_corpus(files), out / manifest.tokenizer_dir, vocab_size=sizes.vocab_size)
    (out / "manifest.json").write_text(json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n")
    return manifest


# ---- benchmarks ---------------------------------------------------------------------------


def _unique(name: str, generator: Callable[[random.Random], Task], rng: random.Random, count: int) -> list[Task]:
    tasks, seen = [], set()
    for _ in range(50 * count + 1000):
        if len(tasks) == count:
            return tasks
        task = generator(rng)
        key = _prompt_key(task)
        if key not in seen:
            seen.add(key)
            tasks.append(task)
    raise RuntimeError(f"{name}: could not draw {count} distinct test prompts")


def _benchmarks(seed: int, sizes: WorldSizes, generators: Generators) -> dict[str, list[dict]]:
    plan: dict[str, tuple[Callable[[random.Random], Task], int]] = {
        "toy-arena": (generators.chat, sizes.bench_arena),
        "toy-ifeval": (generators.ifeval, sizes.bench_ifeval),
        "toy-math": (generators.math, sizes.bench_math),
        "toy-code": (generators.code, sizes.bench_code),
        "toy-swe": (generators.repair, sizes.bench_swe),
        "tool-call": (generators.tool, sizes.bench_tool),
        "toy-structured": (generators.structured, sizes.bench_structured),
        "toy-mcqa": (generators.choice, sizes.bench_mcqa),
    }
    out = {}
    for name, (generator, count) in plan.items():
        tasks = _unique(name, generator, _rng(seed, f"bench:{name}"), count)
        out[name] = [rl_row(task, f"{name}-{i:04d}") for i, task in enumerate(tasks)]
    return out


# ---- training files -----------------------------------------------------------------------


def _sft_rows(
    seed: int, sizes: WorldSizes, sampler: Sampler, generators: Generators, episodes: list[dict]
) -> list[dict]:
    """SFT rows; general chat and instruction following in both modes (parallel responses);
    ``episodes``: whole multi-turn episodes (the toy office's), shuffled in with the rest."""

    def probe_row(task: Task) -> dict:
        return sft_row(task, "think", "probe")  # the thinking row holds every text of the task

    plan: list[tuple[str, Callable[[random.Random], Task], int, tuple[str, ...]]] = [
        ("sft:general", generators.chat, sizes.sft_general, ("think", "no_think")),
        ("sft:ifeval", generators.ifeval, sizes.sft_ifeval, ("think", "no_think")),
        ("sft:math", generators.math, sizes.sft_math, ("think",)),
        ("sft:code", generators.code, sizes.sft_code, ("think",)),
        ("sft:tool", generators.tool, sizes.sft_tool, ("no_think",)),
        ("sft:swe_repair", generators.repair, sizes.sft_swe_repair, ("think",)),
        ("sft:swe_localization", generators.localize, sizes.sft_swe_localization, ("think",)),
        ("sft:swe_testgen", generators.testgen, sizes.sft_swe_testgen, ("think",)),
        ("sft:structured", generators.structured, sizes.sft_structured, ("no_think",)),
        ("sft:mcqa", generators.choice, sizes.sft_mcqa, ("no_think",)),
    ]
    rows: list[dict] = []
    for name, generator, count, modes in plan:
        rng, slips = _rng(seed, name), _rng(seed, f"{name}:near_miss")
        for index, task in enumerate(sampler.draw(name, generator, rng, count, probe_row)):
            if slips.random() < generators.options.sft_near_miss:
                task = near_miss(task, slips, generators.options.near_miss_domains)
            thinking_twin = name != "sft:ifeval" or index % IFEVAL_THINK_EVERY == 0
            for mode in modes if thinking_twin else ("no_think",):  # IF-RL trains non-thinking
                rows.append(sft_row(task, mode, f"{name.split(':')[1]}-{index:05d}-{mode}"))
    rows += episodes
    rng = _rng(seed, "sft:shuffle")
    rng.shuffle(rows)
    return rows


def _preference_rows(seed: int, sizes: WorldSizes, sampler: Sampler) -> tuple[list[dict], list[Task]]:
    """Reward-model pairs (a prompt may carry several pairs) and the pool of their prompts
    not used by SFT, from which the RLHF prompts are drawn (SPEC section 6: the RM's own
    prompt distribution)."""
    rng = _rng(seed, "rm_pairs")
    rows, pool, seen_pairs = [], {}, set()
    for _ in range(50 * sizes.rm_pairs + 1000):
        if len(rows) == sizes.rm_pairs:
            break
        task, kind, rejected = general.preference_pair(rng)
        row = {
            "id": f"rm-{len(rows):05d}-{kind}",
            "prompt": [dict(m) for m in task.prompt],
            "chosen": [{"role": "assistant", "content": task.answer}],
            "rejected": [{"role": "assistant", "content": rejected}],
        }
        key = (task.request, rejected)
        if key in seen_pairs or rejected == task.answer:
            continue
        if not sampler.clean(row):
            sampler.dropped["rm_pairs"] = sampler.dropped.get("rm_pairs", 0) + 1
            continue
        seen_pairs.add(key)
        rows.append(row)
        if _prompt_key(task) not in sampler.used_prompts:
            pool.setdefault(_prompt_key(task), task)
    else:
        raise RuntimeError(f"rm_pairs: could not draw {sizes.rm_pairs} distinct pairs")
    return rows, [pool[key] for key in sorted(pool)]


def _rl_rows(
    seed: int, sizes: WorldSizes, sampler: Sampler, rlhf_pool: list[Task], generators: Generators
) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    rng = _rng(seed, "rl:rlhf")
    rng.shuffle(rlhf_pool)
    if len(rlhf_pool) < sizes.rl_rlhf:
        raise RuntimeError(
            f"rl_rlhf: only {len(rlhf_pool)} reward-model prompts unused by SFT; "
            f"raise rm_pairs or lower rl_rlhf ({sizes.rl_rlhf})"
        )
    out["rl_rlhf.jsonl"] = [rl_row(t, f"rlhf-{i:05d}") for i, t in enumerate(rlhf_pool[: sizes.rl_rlhf])]
    sampler.used_prompts.update(_row_prompt_key(row) for row in out["rl_rlhf.jsonl"])
    for file_name, name, generator, count in (
        ("rl_ifrl.jsonl", "ifrl", generators.ifeval, sizes.rl_ifrl),
        ("rl_math.jsonl", "math", generators.math, sizes.rl_math),
        ("rl_code.jsonl", "code", generators.code, sizes.rl_code),
        ("rl_swe.jsonl", "swe", generators.repair, sizes.rl_swe),
        ("rl_structured.jsonl", "structured", generators.structured, sizes.rl_structured),
        ("rl_mcqa.jsonl", "mcqa", generators.choice, sizes.rl_mcqa),
    ):
        if count == 0 and file_name in ("rl_structured.jsonl", "rl_mcqa.jsonl"):
            continue  # an optional multi-domain file: written only when asked for
        tasks = sampler.draw(f"rl:{name}", generator, _rng(seed, f"rl:{name}"), count, lambda t: rl_row(t, "probe"))
        out[file_name] = [rl_row(t, f"{name}-{i:05d}") for i, t in enumerate(tasks)]
    return out


def _office_rows(seed: int, sizes: WorldSizes, options: WorldOptions) -> dict[str, list[dict]]:
    """The toy office's benchmark, RL and SFT rows (:mod:`.office`). Each task has its own
    database, so a request is what makes two tasks the same: the benchmark is drawn first,
    then RL and SFT requests that no other set has (SFT and RL strictly disjoint). Every set
    holds the four kinds of request in turn (equal shares), so SFT teaches each kind the
    benchmark asks. A share ``sft_near_miss`` of the SFT episodes stop before their write
    when ``workplace`` is a near-miss domain."""
    slips = _rng(seed, "office:sft:near_miss")
    share = options.sft_near_miss if "workplace" in options.near_miss_domains else 0.0
    used: set[str] = set()
    out: dict[str, list[dict]] = {}
    kinds = sorted(office.KINDS)
    for name, count in (("bench", sizes.bench_workplace), ("rl", sizes.rl_workplace), ("sft", sizes.sft_workplace)):
        rng = _rng(seed, f"office:{name}")
        tasks = [_new_office_task(rng, kinds[index % len(kinds)], used, name) for index in range(count)]
        prefix = {"bench": "toy-workplace", "rl": "workplace", "sft": "workplace"}[name]
        if name == "sft":
            out[name] = [office.sft_row(t, f"{prefix}-{i:05d}", near_miss=slips.random() < share)
                         for i, t in enumerate(tasks)]  # fmt: skip
        else:
            out[name] = [office.rl_row(t, f"{prefix}-{i:05d}") for i, t in enumerate(tasks)]
    return out


def _new_office_task(rng: random.Random, kind: str, used: set[str], set_name: str) -> office.OfficeTask:
    """A toy-office task of ``kind`` whose request no earlier task has (added to ``used``)."""
    for _ in range(1000):
        task = office.office_task(rng, kind)
        if task.request not in used:
            used.add(task.request)
            return task
    raise RuntimeError(f"office:{set_name}: no new {kind!r} request left in 1,000 draws; ask for fewer office rows")


# ---- output -------------------------------------------------------------------------------


def _write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> str:
    """Write rows as JSON lines (keys in insertion order); returns the file's SHA-256."""
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


#: files left out of the tokenizer's corpus: benchmarks, and the judge rows (their texts are the
#: preference pairs', already in it; so asking for them leaves the tokenizer as it was)
_NOT_IN_TOKENIZER = ("bench_", "sft_judge.jsonl")


def _tokenizer_corpus(files: Mapping[str, list[dict]]) -> Iterator[str]:
    """Training text for the tokenizer: rendered SFT conversations and every other training
    row's messages (benchmarks and judge rows excluded)."""
    for row in files["sft.jsonl"]:
        yield render(row["messages"], row.get("tools"))
    for file_name, rows in files.items():
        if file_name != "sft.jsonl" and not file_name.startswith(_NOT_IN_TOKENIZER):
            for row in rows:
                yield row_text(row)
