"""What every ``cascade`` command shares (cli/common.py): help that reads as sentences, flags
shown as flags, and light commands that start without the heavy libraries (issue 42, item 9)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cascade_rl.cli import app

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "datasets", "vllm", "trl", "accelerate")


def commands(command=None, path=()):
    """Every command and group of ``cascade``, as its words."""
    command = command or typer.main.get_command(app)
    yield list(path)
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from commands(sub, (*path, name))


@pytest.mark.parametrize("words", list(commands()), ids=lambda words: " ".join(words) or "cascade")
def test_help_reads_as_sentences_and_flags_take_no_value(words):
    """typer showed `--resume <bool>` and rich markup ate `[default: ...]` (`Run directory .`);
    docstrings broke lines mid-sentence."""
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text
    assert not re.search(r"\w \.(\s|$)", text), text  # a space before a period: markup that vanished


def test_a_flag_is_listed_without_a_value_and_a_default_in_brackets_stays():
    text = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    assert re.search(r"--resume\s+Finish an interrupted run", text)
    assert "[default: the recipe's output_dir or runs/NAME]" in text
    text = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}).output
    # a paragraph of the docstring reflows: no line ends inside it where the source did
    assert "or files named with -b NAME=FILE[:FORMAT]; --limit" in " ".join(text.split())


LIGHT = [
    ["--help"],
    ["data", "formats"],
    ["data", "convert", "--help"],
    ["score", "--help"],
    ["run", "recipes/tiny.yaml", "--dry-run"],
]


@pytest.mark.parametrize("words", LIGHT, ids=" ".join)
def test_commands_that_need_no_model_start_without_the_heavy_libraries(words, tmp_path):
    """`cascade data formats` took ~4.5 s to start (torch and transformers through the toy world's
    package); the start-up times are measured in benchmarks/bench_cli_start.py."""
    probe = (
        "import json, runpy, sys\n"
        f"sys.argv = ['cascade', *{words!r}]\n"
        "try:\n    runpy.run_module('cascade_rl.cli', run_name='__main__')\n"
        "except SystemExit as exit:\n    code = exit.code\n"
        f"print(json.dumps([code, sorted(set({HEAVY!r}) & set(sys.modules))]), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "160"},
    )
    code, heavy = json.loads(result.stderr.strip().splitlines()[-1])
    assert code in (0, None), result.stderr
    assert heavy == [], f"cascade {' '.join(words)} imported {heavy}"


def test_a_file_format_is_read_from_the_end_of_a_file_option(tmp_path):
    from cascade_rl.cli.common import split_format

    assert split_format("data/gsm8k/test.jsonl:gsm8k", "-b") == (Path("data/gsm8k/test.jsonl"), "gsm8k", {})
    assert split_format("mbpp.jsonl:mbpp,split=test", "-b") == (Path("mbpp.jsonl"), "mbpp", {"split": "test"})
    assert split_format("data/test.jsonl", "-b") == (Path("data/test.jsonl"), None, {})
    odd = tmp_path / "a:b.jsonl"  # a colon in the file's own name
    odd.write_text("")
    assert split_format(str(odd), "-b") == (odd, None, {})
    with pytest.raises(typer.Exit):
        split_format("test.jsonl:gsmk8", "-b")


def test_scorer_options_are_checked_before_anything_is_served():
    """`cascade serve verifiers --option` is read as `cascade score --option` is: a misspelt
    option is refused before the server starts, naming it."""
    result = CliRunner().invoke(app, ["serve", "verifiers", "--option", "math.languge_penalty=1", "--port", "9"])
    assert result.exit_code == 2
    assert "--option math.languge_penalty: unknown option; math accepts: language_penalty" in result.output
