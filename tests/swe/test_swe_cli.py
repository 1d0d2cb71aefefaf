"""`cascade swe ...` (cli/swe.py), and the end-to-end run with the local transformers backend."""

import json

from swe_assets import git_state
from typer.testing import CliRunner

from cascade_rl.cli.swe import app
from cascade_rl.swe.fixtures import FIXTURES, fixture_dir

runner = CliRunner()


def test_localize_on_the_shipped_fixtures(tmp_path):
    result = runner.invoke(app, ["localize", "--fixtures", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "recall@k" in result.stdout and "retrieval" in result.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["instances"] == len(FIXTURES) and report["recall"]["retrieval"]["3"] == 1.0
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == sorted(
        f"fixtures__{name}-1.json" for name in FIXTURES
    )


def test_argument_errors_are_clear(tmp_path):
    both = runner.invoke(app, ["localize", "--fixtures", "--instances", str(tmp_path / "x.jsonl")])
    assert both.exit_code == 2 and "exactly one of --instances FILE and --fixtures" in both.output
    no_model = runner.invoke(app, ["repair", "--fixtures", "-o", str(tmp_path)])
    assert no_model.exit_code == 2 and "needs --generator" in no_model.output
    (tmp_path / "i.jsonl").write_text("{}\n")
    bad_pair = runner.invoke(app, ["localize", "-i", str(tmp_path / "i.jsonl"), "--checkout", "nopath"])
    assert bad_pair.exit_code == 2 and "expected REPO=PATH" in bad_pair.output


def _toy_model(path):
    """A randomly initialised toy-world Qwen3 with a BPE tokenizer trained on the fixtures."""
    from cascade_rl.world.model import build_tiny_model
    from cascade_rl.world.tokenizer import build_tokenizer

    texts = [p.read_text() for name in FIXTURES for p in fixture_dir(name).rglob("*") if p.is_file()]
    tokenizer = build_tokenizer(texts, vocab_size=400)
    build_tiny_model(
        tokenizer,
        out_dir=path,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=64,
        max_position_embeddings=16384,
    )
    return path


def test_evaluate_end_to_end_with_a_local_model(fixture_checkouts, tmp_path):
    model = _toy_model(tmp_path / "model")
    path, row = fixture_checkouts["textkit"]
    before = git_state(path)
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps(row) + "\n{broken\n")
    output = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "-i",
            str(instances),
            "--checkout",
            f"{row['repo']}={path}",
            "-g",
            str(model),
            "-o",
            str(output),
            "--rollouts",
            "2",
            "--samples",
            "3",
            "--reproduction-tests",
            "1",
            "--max-tokens",
            "12",
            "--files",
            "2",
            "--model-name",
            "toy",
        ],
    )
    assert result.exit_code == 1, result.output  # the broken line is reported...
    assert "instances.jsonl:2" in result.output and "invalid JSON" in result.output
    # ...and the instance still ran through every stage with the real local backend
    trace = json.loads((output / "traces" / "fixtures__textkit-1.json").read_text())
    assert trace["errors"] == []
    assert len(trace["localization"]["responses"]) == 2
    assert trace["localization"]["retrieval"][0] == "textkit/words.py"  # test files are left out (Agentless)
    assert not any(path.startswith("tests/") for path in trace["localization"]["retrieval"])
    assert len(trace["candidates"]) == 3
    assert {c["status"] for c in trace["candidates"]} <= {"unparseable", "empty"}  # random weights
    assert all(c["error"] for c in trace["candidates"])
    assert len(trace["reproduction_tests"]) == 1
    assert sorted(trace["regression_tests"]) == sorted(row["PASS_TO_PASS"])
    assert trace["selection"] == {"best": None, "majority": None, "patch": "", "resolved": False}
    prediction = json.loads((output / "predictions.jsonl").read_text())
    assert prediction == {"instance_id": "fixtures__textkit-1", "model_name_or_path": "toy", "model_patch": ""}
    assert git_state(path) == before


def _build_data_arguments(evaluated_run, tmp_path, *extra):
    rows_file = tmp_path / "instances.jsonl"
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in evaluated_run["rows"]))
    checkouts = [f"--checkout={repo}={path}" for repo, path in evaluated_run["checkouts"].items()]
    traces = str(evaluated_run["output"] / "traces")
    return ["build-data", "--traces", traces, "-i", str(rows_file), *checkouts, "-o", str(tmp_path / "data"), *extra]


def test_build_data_command(evaluated_run, tmp_path):
    arguments = _build_data_arguments(evaluated_run, tmp_path, "--approximate-tokens", "--context-limits", "2000,90000")
    result = runner.invoke(app, [*arguments, "--min-prompt-tokens", "100"])
    assert result.exit_code == 0, result.output
    assert "repair" in result.stdout and "context-2000.jsonl: mixed" in result.stdout
    assert "estimates" in result.output
    assert len((tmp_path / "data" / "sft.jsonl").read_text().splitlines()) == 2 + 2 + 6 + 1 + 2
    assert len((tmp_path / "data" / "context-90000.jsonl").read_text().splitlines()) == 2
    assert not (tmp_path / "data" / "rl.jsonl").exists()


def test_build_data_counts_with_the_policy_tokenizer(evaluated_run, smollm2_tiny, tmp_path):
    from cascade_rl.swe.data import load_tokenizer, prompt_counter

    arguments = _build_data_arguments(evaluated_run, tmp_path, "--context-limits", "90000", "--min-prompt-tokens", "1")
    result = runner.invoke(app, [*arguments, "--tokenizer", str(smollm2_tiny)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "data" / "context-90000.jsonl").read_text().splitlines()]
    count = prompt_counter(load_tokenizer(smollm2_tiny))
    assert rows and all(row["tokens"] == count(row["prompt"]) for row in rows)
    # the recipe's model: the same tokenizer, the same counts
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"name: r\nmodel: {{path: {smollm2_tiny}}}\nstages: [{{kind: eval, name: eval}}]\n")
    again = runner.invoke(app, [*arguments, "--recipe", str(recipe)])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "data" / "context-90000.jsonl").read_text() == "".join(json.dumps(r) + "\n" for r in rows)


def test_build_data_errors(evaluated_run, tmp_path):
    arguments = _build_data_arguments(evaluated_run, tmp_path)
    no_count = runner.invoke(app, arguments)
    assert no_count.exit_code == 2 and "give one of --tokenizer PATH, --recipe RECIPE" in no_count.output
    bad = runner.invoke(app, [*arguments, "--approximate-tokens", "--context-limits", "16k"])
    assert bad.exit_code == 2 and "--context-limits takes token counts" in bad.output
    tight = runner.invoke(
        app, [*arguments, "--approximate-tokens", "--context-limits", "100", "--min-prompt-tokens", "100"]
    )
    assert tight.exit_code == 2 and "no room under the smallest context limit 100" in tight.output
    missing = runner.invoke(app, [*arguments, "--tokenizer", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "cannot load the tokenizer" in missing.output


def test_headline_from_harness_reports(tmp_path):
    reports = []
    for j, resolved in enumerate((["a"], ["a", "b"], [])):
        reports.append(tmp_path / f"run-{j}.json")
        reports[-1].write_text(json.dumps({"resolved_ids": resolved, "submitted_ids": ["a", "b"]}))
    (tmp_path / "best.json").write_text(json.dumps({"resolved_ids": ["a", "b"]}))
    (tmp_path / "instances.jsonl").write_text("".join(json.dumps({"instance_id": i}) + "\n" for i in "abcd"))
    result = runner.invoke(app, ["headline", *map(str, reports), "--best", str(tmp_path / "best.json")])
    assert result.exit_code == 0, result.output
    assert "pass@1 50.0 ± 28.9 (mean of 3 run(s)" in result.stdout and "best@3" in result.stdout
    named = runner.invoke(app, ["headline", *map(str, reports), "-i", str(tmp_path / "instances.jsonl")])
    assert named.exit_code == 0 and "pass@1 25.0" in named.stdout and "4 instances" in named.stdout
    (tmp_path / "bad.json").write_text("{}")
    bad = runner.invoke(app, ["headline", str(tmp_path / "bad.json")])
    assert bad.exit_code == 2 and "not a SWE-bench harness report" in bad.output
