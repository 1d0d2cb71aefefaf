"""Test-time scaling for competitive programming (SPEC section 8; DESIGN: ``tts/``): the
generate-select-submit loop of the paper's IOI 2025 run, a local judge with IOI semantics, the
problem format with a shipped demo set (the ``cascade tts`` commands: :mod:`cascade_rl.cli.tts`).

* :mod:`.problem`   problems with subtasks: ``problem.yaml``, validation, loading
* :mod:`.kattis`    converter from the Kattis problem-package layout
* :mod:`.judge`     sandboxed judge: verdicts AC/PC/WA/TLE/MLE/RE/CE, IOI scoring, checkers
* :mod:`.prompts`   the appendix C.3 prompt: statement, accepted code, submission history
* :mod:`.selection` which candidate to submit (Tail-10 confidence by default; pluggable)
* :mod:`.sampling`  candidates from a local model or an OpenAI-compatible server
* :mod:`.loop`      the rounds, budgets and resumable run directory (:mod:`.store`)

See docs/tts.md.
"""

from cascade_rl.tts.judge import Judge, JudgeError, JudgeResult, problem_score
from cascade_rl.tts.loop import TTSConfig, arun_tts, run_tts
from cascade_rl.tts.problem import Problem, ProblemError, load_problem, load_problems, shipped_problems
from cascade_rl.tts.sampling import Sampling

__all__ = [
    "Judge",
    "JudgeError",
    "JudgeResult",
    "Problem",
    "ProblemError",
    "Sampling",
    "TTSConfig",
    "arun_tts",
    "load_problem",
    "load_problems",
    "problem_score",
    "run_tts",
    "shipped_problems",
]
