"""The test-time-scaling loop for competitive programming (SPEC section 8, seed section
"Test-Time Scaling in Practice: IOI 2025"): generate, select, submit, learn from the verdict.

Per problem, up to ``rounds`` (50) rounds. A round works on every subtask not yet solved, in
subtask order:

1. **generate** ``candidates`` (20) responses to the subtask's prompt (:mod:`.prompts`: the
   statement with the subtask's constraints, the accepted code of solved subtasks, the
   submission history), all subtasks of the round at once, each saved as it arrives;
2. **filter**: drop responses without code (an unfinished thinking response, no ```python
   block) and those whose program fails a sample of the statement that meets the subtask's
   constraints (run in the sandbox);
   unless ``resubmit`` is set, also programs already submitted (the verdict is known, the
   submission would be wasted; the paper does not say, this fills the gap);
3. **select** one survivor with the selection heuristic (:mod:`.selection`, Tail-10 by default);
4. **submit** it to the local judge (:mod:`.judge`), which scores every subtask; a subtask
   solved by an earlier submission of the same round is not submitted again.

Prompts of round r are built from the submissions of rounds before r. History per unsolved
subtask: its last ``history_incorrect`` (5) incorrect submissions with verdicts; for
partial-score problems instead its ``history_top`` (3) best-scoring submissions. Cross-subtask
insight: the accepted code of every solved subtask goes into the other subtasks' prompts.

Budgets per problem: at most ``max_generations`` (1,000 = 20 x 50) generations and
``max_submissions`` (50, IOI's limit) submissions. Within a round the generations left are
handed out in subtask order, ``candidates`` at most each. A problem stops when every subtask
is solved, its rounds are done, or a budget is spent.

Everything is saved as it happens (:mod:`.store`); a resumed run replays the logs and makes
only the generations that are missing. Outputs per problem: ``submissions.jsonl``,
``trajectory.jsonl`` and ``summary.json`` after every round, ``trajectory.png`` when the problem
stops; for the run: ``summary.json`` and ``trajectory.png`` at the end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.code import extract_code
from cascade_rl.tts.judge import Judge, JudgeResult, passes_samples, problem_score, verdict_line
from cascade_rl.tts.problem import Problem, Subtask
from cascade_rl.tts.prompts import AcceptedCode, PastSubmission, build_prompt, subtask_heading
from cascade_rl.tts.sampling import Generation, Sampling, candidate_source
from cascade_rl.tts.selection import Candidate, needs_confidence, resolve_heuristic
from cascade_rl.tts.store import ProblemLog, check_run_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TTSConfig:
    """Options of the loop; defaults are the paper's (SPEC section 8)."""

    rounds: int = 50
    candidates: int = 20
    max_generations: int = 1000
    max_submissions: int = 50
    selection: str = "tail10"
    history_incorrect: int = 5
    history_top: int = 3
    resubmit: bool = False
    mode: str | None = "think"
    sampling: Sampling = field(default_factory=Sampling)

    def __post_init__(self) -> None:
        for name in ("rounds", "candidates", "max_generations", "max_submissions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TTSConfig.{name} must be a positive integer, got {value!r}")
        for name in ("history_incorrect", "history_top"):
            if getattr(self, name) < 0:
                raise ValueError(f"TTSConfig.{name} must be >= 0")
        if self.mode not in (None, "think", "no_think"):
            raise ValueError(f"TTSConfig.mode must be 'think', 'no_think' or None, got {self.mode!r}")
        resolve_heuristic(self.selection)


@dataclass
class Submission:
    number: int  # 1-based within the problem
    round: int
    subtask: int  # the subtask it was generated for
    code: str
    result: JudgeResult


class ProblemState:
    """What the submissions so far imply: solved subtasks, their accepted code, best scores."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.submissions: list[Submission] = []
        self.accepted: dict[int, str] = {}  # subtask index -> code of the first submission solving it

    def apply(self, step: dict) -> None:
        row = step.get("submission")
        if not row:
            return
        submission = Submission(
            row["number"], step["round"], step["subtask"], row["code"], JudgeResult.from_dict(row["result"])
        )
        self.submissions.append(submission)
        for index, result in enumerate(submission.result.subtasks):
            if result.solved:
                self.accepted.setdefault(index, submission.code)

    def unsolved(self) -> list[Subtask]:
        return [subtask for subtask in self.problem.subtasks if subtask.index not in self.accepted]

    def score(self) -> tuple[float, list[float]]:
        return problem_score(self.problem, (s.result for s in self.submissions))

    def submitted_codes(self) -> set[str]:
        return {s.code.strip() for s in self.submissions}

    def insight(self, subtask: Subtask) -> list[AcceptedCode]:
        """Accepted code of the other solved subtasks, one entry per distinct program."""
        by_code: dict[str, list[str]] = {}
        for index in sorted(self.accepted):
            if index != subtask.index:
                other = self.problem.subtasks[index]
                by_code.setdefault(self.accepted[index], []).append(f"{subtask_heading(other)}: {other.constraints}")
        return [AcceptedCode(tuple(constraints), code) for code, constraints in by_code.items()]

    def history(self, subtask: Subtask, config: TTSConfig) -> list[PastSubmission]:
        """Last incorrect submissions for the subtask, or its best-scoring ones (partial score)."""
        own = [s for s in self.submissions if s.subtask == subtask.index]
        if self.problem.partial_score:
            ranked = sorted(own, key=lambda s: (s.result.subtasks[subtask.index].score, s.number), reverse=True)
            chosen = ranked[: config.history_top]
        else:
            incorrect = [s for s in own if not s.result.subtasks[subtask.index].solved]
            chosen = incorrect[-config.history_incorrect :] if config.history_incorrect else []
        return [
            PastSubmission(
                s.code,
                verdict_line(s.result.subtasks[subtask.index]),
                s.result.subtasks[subtask.index].score,
                subtask.points,
            )
            for s in chosen
        ]

    def prompt(self, subtask: Subtask, config: TTSConfig) -> list[dict]:
        message: dict[str, Any] = {
            "role": "user",
            "content": build_prompt(self.problem, subtask, self.insight(subtask), self.history(subtask, config)),
        }
        if config.mode:
            message["mode"] = config.mode
        return [message]


@dataclass
class Prepared:
    """A subtask's round before submission: its survivors and what was dropped."""

    generations: int
    candidates: list[Candidate]
    dropped: dict[str, int]


#: ``progress(problem_id, event)``: ``{"event": "generating", "round", "candidates": {subtask: n}}`` when a
#: round starts generating; ``{"event": "step", "round", "step", "replayed", "score", ...}`` per finished step.
Progress = Callable[[str, dict], None]


class ProblemRun:
    """The loop on one problem (module docstring)."""

    def __init__(
        self,
        problem: Problem,
        source: Any,
        judge: Judge,
        config: TTSConfig,
        out: Path,
        progress: Progress | None = None,
    ) -> None:
        self.problem, self.source, self.judge, self.config = problem, source, judge, config
        self.log = ProblemLog(out / problem.id)
        self.select = resolve_heuristic(config.selection)
        self.progress = progress or (lambda problem_id, event: None)
        self.state = ProblemState(problem)
        self.trajectory: list[dict] = [self._trajectory_row(0)]
        self.stopped = ""

    # ------------------------------------------------------------------ budgets and stopping

    @property
    def generations_used(self) -> int:
        return len(self.log.generations)

    def _stop_reason(self, round_number: int) -> str:
        if not self.state.unsolved():
            return "solved"
        if round_number > self.config.rounds:
            return "rounds"
        if self.log.generations_before(round_number) >= self.config.max_generations:
            return "generation budget"
        if len(self.state.submissions) >= self.config.max_submissions:
            return "submission budget"
        return ""

    def _allocation(self, round_number: int, targets: Sequence[Subtask]) -> dict[int, int]:
        left = self.config.max_generations - self.log.generations_before(round_number)
        allocation = {}
        for subtask in targets:
            allocation[subtask.index] = max(0, min(self.config.candidates, left))
            left -= allocation[subtask.index]
        return allocation

    # ------------------------------------------------------------------ one subtask

    async def _generate(self, round_number: int, subtask: Subtask, messages: list[dict], wanted: int) -> list[dict]:
        rows = self.log.generations_for(round_number, subtask.index)[:wanted]
        missing = wanted - len(rows)
        if missing > 0:
            next_index = len(self.log.generations_for(round_number, subtask.index))

            def save(generation: Generation) -> None:
                nonlocal next_index
                row = {
                    "round": round_number,
                    "subtask": subtask.index,
                    "index": next_index,
                    "text": generation.text,
                    "confidence": generation.confidence,
                }
                next_index += 1
                self.log.add_generation(row)
                rows.append(row)

            await self.source.sample(messages, missing, save)
        return rows

    async def _prepare(self, round_number: int, subtask: Subtask, messages: list[dict], wanted: int) -> Prepared:
        rows = await self._generate(round_number, subtask, messages, wanted)
        dropped = {"no_code": 0, "samples": 0, "resubmission": 0}
        with_code: list[Candidate] = []
        for row in rows:
            split = split_thinking(row["text"])
            code = extract_code(split.answer) if split.finished else None
            if code is None:
                dropped["no_code"] += 1
            else:
                with_code.append(Candidate(row["index"], row["text"], code, row.get("confidence")))
        distinct = list(dict.fromkeys(c.code for c in with_code))
        sample_runs = await asyncio.gather(*(self.judge.arun_samples(self.problem, code, subtask) for code in distinct))
        passing = {code for code, runs in zip(distinct, sample_runs) if passes_samples(self.problem, subtask, runs)}
        candidates = [c for c in with_code if c.code in passing]
        dropped["samples"] = len(with_code) - len(candidates)
        return Prepared(len(rows), candidates, dropped)

    async def _submit(self, round_number: int, subtask: Subtask, prepared: Prepared) -> dict:
        step: dict[str, Any] = {
            "round": round_number,
            "subtask": subtask.index,
            "subtask_name": subtask.name,
            "generations": prepared.generations,
            "dropped": prepared.dropped,
            "selected": None,
            "submission": None,
            "note": None,
        }
        candidates = prepared.candidates
        if not self.config.resubmit:
            submitted = self.state.submitted_codes()
            fresh = [c for c in candidates if c.code.strip() not in submitted]
            prepared.dropped["resubmission"] = len(candidates) - len(fresh)
            candidates = fresh
        step["kept"] = len(candidates)
        if subtask.index in self.state.accepted:
            step["note"] = "solved by an earlier submission of this round"
        elif len(self.state.submissions) >= self.config.max_submissions:
            step["note"] = "submission budget spent"
        elif not candidates:
            step["note"] = "no candidate survived the filters" if prepared.generations else "generation budget spent"
        else:
            self._warn_without_confidence(candidates)
            chosen = candidates[self.select(candidates)]
            result = await self.judge.ajudge(self.problem, chosen.code)
            step["selected"] = chosen.index
            step["confidence"] = chosen.confidence
            step["submission"] = {
                "number": len(self.state.submissions) + 1,
                "code": chosen.code,
                "result": result.to_dict(),
            }
        return step

    _warned = False

    def _warn_without_confidence(self, candidates: Sequence[Candidate]) -> None:
        """Once per process: tail10 got candidates without log-probabilities to rank them."""
        if needs_confidence(self.select) and all(c.confidence is None for c in candidates) and not ProblemRun._warned:
            ProblemRun._warned = True
            log.warning(
                "the generator gave no log-probabilities: %s submits the earliest survivor", self.config.selection
            )

    # ------------------------------------------------------------------ rounds

    def _trajectory_row(self, round_number: int) -> dict:
        score, best = self.state.score()
        return {
            "round": round_number,
            "score": round(score, 6),
            "subtask_scores": [round(value, 6) for value in best],
            "solved": sorted(self.problem.subtasks[i].name for i in self.state.accepted),
            "generations": sum(1 for g in self.log.generations if g["round"] <= round_number),
            "submissions": len(self.state.submissions),
        }

    async def _round(self, round_number: int) -> bool:
        """Run (or replay from the logs) one round; True when it did new work."""
        targets = self.state.unsolved()
        done = {step["subtask"]: step for step in self.log.steps if step["round"] == round_number}
        allocation = self._allocation(round_number, targets)
        todo = [s for s in targets if s.index not in done]
        prompts = {s.index: self.state.prompt(s, self.config) for s in todo}
        if todo:
            wanted = {s.name: allocation[s.index] for s in todo}
            self.progress(self.problem.id, {"event": "generating", "round": round_number, "candidates": wanted})
        prepared = await asyncio.gather(
            *(self._prepare(round_number, s, prompts[s.index], allocation[s.index]) for s in todo)
        )
        ready = {s.index: p for s, p in zip(todo, prepared)}
        for subtask in targets:
            step = done.get(subtask.index)
            if step is None:
                step = await self._submit(round_number, subtask, ready[subtask.index])
                self.log.add_step(step)
            self.state.apply(step)
            replayed = subtask.index in done
            event = {"event": "step", "round": round_number, "step": step, "replayed": replayed, **self._totals()}
            self.progress(self.problem.id, event)
        return bool(todo)

    def _totals(self) -> dict[str, Any]:
        score, _ = self.state.score()
        return {
            "score": score,
            "max_score": self.problem.max_score,
            "generations": self.generations_used,
            "submissions": len(self.state.submissions),
        }

    async def run(self) -> dict:
        """Run (or resume) the loop; returns the problem's summary."""
        round_number = 1
        while True:
            self.stopped = self._stop_reason(round_number)
            if self.stopped:
                break
            new_work = await self._round(round_number)
            self.trajectory.append(self._trajectory_row(round_number))
            if new_work:
                self._write_outputs()
            round_number += 1
        self._write_outputs()
        await asyncio.to_thread(self._plot)  # once at the end: a plot costs more than a round's bookkeeping
        return self.summary()

    def summary(self) -> dict:
        score, best = self.state.score()
        return {
            "problem": self.problem.id,
            "title": self.problem.title,
            "score": round(score, 6),
            "max_score": self.problem.max_score,
            "subtasks": [
                {
                    "name": s.name,
                    "points": s.points,
                    "best": round(best[s.index], 6),
                    "solved": s.index in self.state.accepted,
                }
                for s in self.problem.subtasks
            ],
            "rounds": self.trajectory[-1]["round"],
            "generations": {"used": self.generations_used, "budget": self.config.max_generations},
            "submissions": {"used": len(self.state.submissions), "budget": self.config.max_submissions},
            "stopped": self.stopped,
        }

    def _submission_rows(self) -> list[dict]:
        return [
            {
                "number": s.number,
                "round": s.round,
                "subtask": self.problem.subtasks[s.subtask].name,
                "score": s.result.score,
                "verdicts": {r.name: r.verdict for r in s.result.subtasks},
                "code": s.code,
                **s.result.to_dict(),
            }
            for s in self.state.submissions
        ]

    def _write_outputs(self) -> None:
        self.log.write_outputs(self._submission_rows(), self.trajectory, self.summary())

    def _plot(self) -> None:
        from cascade_rl.tts.report import plot_trajectories

        plot_trajectories(
            {self.problem.id: (self.trajectory, self.problem.max_score)}, self.log.directory / "trajectory.png"
        )


async def arun_tts(
    problems: Sequence[Problem],
    generator: Any,
    out: Path,
    config: TTSConfig | None = None,
    *,
    judge: Judge | None = None,
    progress: Progress | None = None,
) -> list[dict]:
    """Run the loop on every problem (concurrently) into ``out``; returns their summaries."""
    from cascade_rl.tts.report import plot_trajectories, write_run_summary

    config = config or TTSConfig()
    sampling = config.sampling
    if sampling.confidence and not needs_confidence(resolve_heuristic(config.selection)):
        sampling = Sampling(**{**asdict(sampling), "confidence": False})
    source = candidate_source(generator, sampling)
    check_run_file(out, _config_record(config), {p.id: p.digest for p in problems})
    own_judge = judge is None
    judge = judge or Judge()
    try:
        runs = [ProblemRun(problem, source, judge, config, out, progress) for problem in problems]
        summaries = list(await asyncio.gather(*(run.run() for run in runs)))
    finally:
        if own_judge:
            judge.close()
    plot_trajectories({r.problem.id: (r.trajectory, r.problem.max_score) for r in runs}, out / "trajectory.png")
    write_run_summary(out, summaries)
    return summaries


def run_tts(problems: Sequence[Problem], generator: Any, out: Path, config: TTSConfig | None = None, **options: Any):
    """:func:`arun_tts` for synchronous callers."""
    return asyncio.run(arun_tts(problems, generator, out, config, **options))


def _config_record(config: TTSConfig) -> dict:
    return asdict(config)
