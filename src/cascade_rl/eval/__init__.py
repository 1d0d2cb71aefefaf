"""Evaluation (SPEC section 9): benchmarks and their sampling, the arena, the Codeforces Elo
estimate, the run report and the comparison of runs. The sampling metrics (avg@k, pass@k, ...)
are ground math, :mod:`cascade_rl.metrics`. Modules are imported on use
(``from cascade_rl.eval.report import build_report``): ``report`` and ``compare`` draw plots
with matplotlib.
"""
