"""Evaluation (SPEC section 9): sampling metrics, the Codeforces Elo estimate, the run report.

The sampling metrics (:mod:`cascade_rl.metrics`, re-exported here) and ``elo`` are pure Python;
``report`` (matplotlib plots) is imported on use:
``from cascade_rl.eval.report import build_report, print_summary``.
"""

from cascade_rl.eval.elo import Contest, Contestant, ContestResult, Problem, Standing, codeforces_elo
from cascade_rl.metrics import avg_at_k, best_at_k, majority_at_k, pass_at_k, pass_at_k_estimate

__all__ = [
    "Contest",
    "Contestant",
    "ContestResult",
    "Problem",
    "Standing",
    "avg_at_k",
    "best_at_k",
    "codeforces_elo",
    "majority_at_k",
    "pass_at_k",
    "pass_at_k_estimate",
]
