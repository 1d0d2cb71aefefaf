"""What the commands share (cli/common.py): the sampling flags are one option group whose value is
one llm.base.Sampling (issue 43), the same flags on every command that samples."""

import typer
from typer.testing import CliRunner

from cascade_rl.cli import app
from cascade_rl.cli.common import option_groups, sampling_options
from cascade_rl.llm.base import Sampling


def test_the_group_gives_one_sampling_value_with_the_commands_budget():
    group = sampling_options(512)
    seen = []
    command = typer.Typer()

    @command.command()
    @option_groups(sample=group)
    def sample_something(*, sample: group) -> None:  # type: ignore[valid-type]
        seen.append(sample.sampling(4))

    result = CliRunner().invoke(command, ["--temperature", "1.0", "--top-k", "20"])
    assert result.exit_code == 0, result.output
    assert seen == [Sampling(n=4, temperature=1.0, top_p=0.95, max_tokens=512, top_k=20)]
    assert CliRunner().invoke(command, ["--top-p", "1.5"]).exit_code == 2  # refused before any work


def test_every_command_that_samples_takes_the_same_flags():
    commands = [["data", "rejection-sample"], ["data", "difficulty"], ["data", "offtopic"], ["swe", "repair"],
                ["tts", "run"]]  # fmt: skip
    for words in commands:
        text = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200"}).output
        for flag in ("--temperature", "--top-p", "--max-tokens"):
            assert flag in text, (words, flag)
