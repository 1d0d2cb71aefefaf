"""The ``cascade`` command (DESIGN.md, layer ``cli``): parses arguments and calls the library. It
is the only place that imports a command-line framework (typer); every module here is one group
of commands, sharing :mod:`.common` (errors and exit codes, option groups).

    cascade run RECIPE        run a recipe: SFT -> RM -> RLHF -> IF-RL -> Math -> Code -> SWE  (run)
    cascade eval / report / compare / elo   evaluate a model or runs, Codeforces Elo           (evaluate)
    cascade score IN.jsonl    score responses with the reward verifiers                        (score)
    cascade model import SRC  a GGUF file or Hugging Face directory -> plain checkpoint        (model)
    cascade data ...          data curation: convert, dedup, decontaminate, constrain, ...     (data)
    cascade swe ...           the Agentless SWE pipeline: localise, repair, validate, rank     (swe)
    cascade tts ...           test-time scaling for competitive programming                    (tts)
    cascade serve ...         serve a reward model or a distillation teacher                   (serve)

``python -m cascade_rl.cli`` is the same command (``accelerate launch -m cascade_rl.cli run ...``).
Heavy libraries are imported inside the commands, so ``cascade --help`` answers at once.
"""

from __future__ import annotations

from cascade_rl.cli import data, evaluate, model, run, score, serve, swe, tts
from cascade_rl.cli.common import command_group

app = command_group(
    "Cascade RL: cascaded, domain-wise RL post-training for reasoning models (Nemotron-Cascade). "
    "Every command has --help; docs/ has the details.",
    pretty_exceptions_enable=False,
)

CASCADE, TOOLS = "Run and evaluate", "Tools"
app.command("run", rich_help_panel=CASCADE)(run.run)
app.command("eval", rich_help_panel=CASCADE)(evaluate.evaluate)
app.command("report", rich_help_panel=CASCADE)(evaluate.report)
app.command("compare", rich_help_panel=CASCADE)(evaluate.compare)
app.command("score", rich_help_panel=CASCADE)(score.score)
app.command("elo", rich_help_panel=TOOLS)(evaluate.elo)
app.add_typer(model.app, name="model", rich_help_panel=TOOLS)
app.add_typer(data.app, name="data", rich_help_panel=TOOLS)
app.add_typer(swe.app, name="swe", rich_help_panel=TOOLS)
app.add_typer(tts.app, name="tts", rich_help_panel=TOOLS)
app.add_typer(serve.app, name="serve", rich_help_panel=TOOLS)


def main() -> None:
    """The ``cascade`` console script. Untrusted code refused because it cannot be isolated here
    (and nobody opted into rlimits only), whichever command met it, is one line: ``error: ...``."""
    from cascade_rl.cli.common import EXIT_USAGE, fail
    from cascade_rl.sandbox import IsolationUnavailable

    try:
        app()
    except IsolationUnavailable as error:
        fail(error)
        raise SystemExit(EXIT_USAGE) from None
