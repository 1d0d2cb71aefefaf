"""No training row shares a 9-gram with a question the run is evaluated on (SPEC section 3).

The cascade screens every stage's training data against the questions of the recipe's
benchmarks (``eval.benchmarks``, each as it is evaluated: its format, split and date window, but
every row, not only the first ``limit``) while the data is read (:func:`cascade_rl.data.loading.screening`):
a row whose prompt shares an n-gram with a benchmark question is dropped and counted in the
stage's ``data_report.json`` with the benchmark's name.

Benchmarks repeat their own instructions: every converted GSM8K question ends in the same
request for a boxed answer, every MBPP one in "Your code should pass this test", IFEval's
prompts quote the same constraint wording. Training rows built the same way carry the same
words, which are not a question's content. A run of 4 or more words that at least
``eval.decontaminate_template`` of one benchmark's questions carry (half, by default) is such a
template, and no n-gram that holds one of its words is matched (the paper's rule is plain 9-gram
overlap; the template rule keeps it from dropping every training row of a format the benchmark
shares: :class:`cascade_rl.data.hygiene.NgramIndex`, measured in docs/data-formats.md). A copy of
a whole benchmark question, template included, is always caught. The cost of the rule: a
question whose own words between the template's are fewer than 9 is matched only as a whole
copy. A source that loses more than :data:`WARN_SHARE` of its rows to the screen is said in the
log with the n-grams that removed most.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence

from cascade_rl.data.hygiene import NgramIndex
from cascade_rl.data.loading import Screen
from cascade_rl.data.rows import RowError, prompt_text
from cascade_rl.eval.benchmarks import load_benchmark
from cascade_rl.recipe import EvalSpec

log = logging.getLogger(__name__)


def benchmark_screen(spec: EvalSpec, variables: Mapping[str, str] | None = None) -> Screen | None:
    """The screen of the recipe's benchmarks, or None when the recipe turns it off or has none."""
    if not spec.decontaminate or not spec.benchmarks:
        return None
    index = NgramIndex(spec.decontaminate_n)
    for bench in spec.benchmarks:
        rows = load_benchmark(bench.model_copy(update={"limit": None}), variables)
        index.add(bench.name, [_text(row) for row in rows], template=spec.decontaminate_template)
    n = spec.decontaminate_n

    def screen(rows: Sequence[dict]) -> list[str | None]:
        found = index.matches([_text(row) for row in rows])
        _warn_if_much(found, len(rows))
        return [f"shares a {n}-gram with {', '.join(sorted(hits))}" if hits else None for hits in found]

    return screen


#: a source that loses more than this share of its rows to the screen is said in the log
WARN_SHARE = 0.1


def _warn_if_much(found: Sequence[Mapping[str, str]], read: int) -> None:
    dropped = sum(1 for hits in found if hits)
    if read and dropped > WARN_SHARE * read:
        grams = Counter(f"{name}: “{gram}”" for hits in found for name, gram in hits.items())
        top = "; ".join(f"{gram} {count}" for gram, count in grams.most_common(3))
        log.warning(
            "decontamination dropped %d of %d rows of a source (%.0f%%), mostly by %s (eval.decontaminate_template "
            "sets what counts as a benchmark's template)",
            dropped,
            read,
            100 * dropped / read,
            top,
        )


def _text(row: Mapping) -> str:
    """A row's prompt text; for rows of ``format: constrain`` (and SFT rows sampled from them),
    their request without the drawn constraints (``base_text``): the constraint wording is the
    project's own instruction templates, which IFEval's prompts quote by design."""
    reference = row.get("reference")
    base = row.get("base_text") or (reference.get("base_text") if isinstance(reference, Mapping) else None)
    if isinstance(base, str):
        return base
    try:
        return prompt_text(row)
    except (RowError, KeyError, TypeError):
        return ""
