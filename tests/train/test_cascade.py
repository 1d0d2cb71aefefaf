"""`cascade run` end to end on a tiny model: stage hand-over, run layout, report, resume after
a crash between stages and after `kill -9` inside a stage, and errors before any compute."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from child_env import child_environment

from cascade_rl.recipe import RecipeError, load_recipe
from cascade_rl.train.cascade import Cascade

TESTS = Path(__file__).resolve().parents[1]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def recipe_file(tmp_path, tiny_checkpoint):
    questions = [(a, b) for a in range(4) for b in range(3)]
    sft = write_jsonl(
        tmp_path / "sft.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": f"what is {a} plus {b}?", "mode": "think"},
                    {"role": "assistant", "content": f"<think>{a}+{b}={a + b}</think>{a + b}"},
                ]
            }
            for a, b in questions
        ],
    )
    pairs = write_jsonl(
        tmp_path / "pairs.jsonl",
        [{"prompt": f"what is {a} plus {b}?", "chosen": f"{a + b}", "rejected": "hello world"} for a, b in questions],
    )
    rlhf = write_jsonl(tmp_path / "rlhf.jsonl", [{"prompt": f"say hello {i}"} for i in range(4)])
    toy = write_jsonl(
        tmp_path / "toy.jsonl", [{"prompt": f"what is {a} plus {b}?", "answer": str(a + b)} for a, b in questions[:4]]
    )
    recipe = {
        "name": "tiny-test",
        "seed": 0,
        "model": {"path": str(tiny_checkpoint)},
        "runtime": {"reward_workers": 1},
        "eval": {
            "decontaminate": False,  # the toy stage trains on its benchmark's questions on purpose
            "benchmarks": [
                {
                    "name": "toy-sum",
                    "data": toy,
                    "domain": "tiny_assets:contains_answer",
                    "k": 2,
                    "max_new_tokens": 6,
                    "temperature": 1.0,
                }
            ],
        },
        "stages": [
            {
                "kind": "sft",
                "substages": [
                    {
                        "data": sft,
                        "max_length": 64,
                        "batch_size": 4,
                        "per_device_batch_size": 4,
                        "max_steps": 2,
                        "learning_rate": 1e-3,
                    }
                ],
            },
            {
                "kind": "reward_model",
                "name": "rm",
                "data": pairs,
                "batch_size": 4,
                "per_device_batch_size": 4,
                "max_steps": 2,
                "max_length": 64,
                "eval": [],
            },
            {
                "kind": "grpo",
                "name": "rlhf",
                "data": rlhf,
                "rollouts_per_prompt": 2,
                "prompts_per_batch": 2,
                "curriculum": [{"max_response_length": 5, "max_steps": 1}],
            },
            {
                "kind": "grpo",
                "name": "toy",
                "data": toy,
                "domain": "tiny_assets:kill_once",
                "thinking": "no_think",
                "rollouts_per_prompt": 2,
                "prompts_per_batch": 2,
                "learning_rate": 1e-3,
                "curriculum": [{"max_response_length": 5, "max_steps": 1}, {"max_response_length": 6, "max_steps": 2}],
            },
        ],
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def cascade_cli(*args, env=None, cwd=None):
    environment = child_environment(**(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
        cwd=cwd,
    )


def test_full_run_layout_report_and_resume_skips_everything(recipe_file, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    run_dir = tmp_path / "run"
    report = Cascade(load_recipe(recipe_file), run_dir, echo=lambda _: None).run()
    stages = ["01-sft", "02-rm", "03-rlhf", "04-toy"]
    for name in stages:
        status = json.loads((run_dir / name / "stage.json").read_text())
        assert status["status"] == "done" and (run_dir / name / "model" / "config.json").exists()
        assert status["wall_s"] == round(status["train_s"] + status["eval_s"], 2)
        assert "earlier_attempts_s" not in status and not (run_dir / name / "attempt.json").exists()
    # the policy each stage hands over, relative to the run (the run resumes from any directory)
    assert json.loads((run_dir / "02-rm/stage.json").read_text())["policy"] == "01-sft/model"
    assert json.loads((run_dir / "03-rlhf/stage.json").read_text())["policy"] == "03-rlhf/model"
    assert not (run_dir / "02-rm/eval.json").exists()  # eval: [] on that stage
    assert "toy-sum" in json.loads((run_dir / "04-toy/eval.json").read_text())
    assert (run_dir / "03-rlhf/metrics.jsonl").read_text().count("\n") == 1
    summary = json.loads(report.with_suffix(".json").read_text())
    assert [s["stage"] for s in summary["stages"]] == ["sft", "rm", "rlhf", "toy"]
    assert (run_dir / "report.md").exists()

    before = {name: (run_dir / name / "stage.json").stat().st_mtime_ns for name in stages}
    lines = []
    Cascade(load_recipe(recipe_file), run_dir, echo=lines.append).run(resume=True)
    assert {name: (run_dir / name / "stage.json").stat().st_mtime_ns for name in stages} == before
    assert sum("finished earlier, skipped" in line for line in lines) == 4

    with pytest.raises(RecipeError, match="--resume"):
        Cascade(load_recipe(recipe_file), run_dir, echo=lambda _: None).run()


def test_kill_9_inside_a_stage_then_resume_finishes_without_redoing_work(recipe_file, tmp_path):
    run_dir = tmp_path / "run"
    flag = tmp_path / "kill-flag"
    flag.write_text("armed")
    env = {"CASCADE_TEST_KILL_FLAG": str(flag), "CASCADE_TEST_KILL_AFTER": str(run_dir / "04-toy/substage-1/done")}
    crashed = cascade_cli("run", str(recipe_file), "--out", "run", env=env, cwd=tmp_path)  # a relative --out
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    crashed_at = json.loads((run_dir / "04-toy/attempt.json").read_text())["started"]
    assert not flag.exists()
    assert json.loads((run_dir / "03-rlhf/stage.json").read_text())["status"] == "done"
    assert not (run_dir / "04-toy/stage.json").exists() and (run_dir / "04-toy/substage-1/done").exists()
    finished = {p: p.stat().st_mtime_ns for p in [run_dir / "01-sft/stage.json", run_dir / "04-toy/substage-1/done"]}

    elsewhere = tmp_path / "elsewhere"  # resumed from another directory: the finished stages' checkpoints still found
    elsewhere.mkdir()
    resumed = cascade_cli("run", str(recipe_file), "--out", "../run", "--resume", env=env, cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert {p: p.stat().st_mtime_ns for p in finished} == finished  # finished work was not redone
    status = json.loads((run_dir / "04-toy/stage.json").read_text())
    assert status["status"] == "done"
    assert (run_dir / "04-toy/substage-2/done").exists() and (run_dir / "report.json").exists()
    # the killed process's time on the stage (its start to its last write) is in the stage's wall time
    killed_s = finished[run_dir / "04-toy/substage-1/done"] / 1e9 - crashed_at
    assert killed_s > 0 and status["earlier_attempts_s"] >= round(killed_s, 2) - 0.01
    assert status["wall_s"] == round(status["train_s"] + status["eval_s"] + status["earlier_attempts_s"], 2)
    assert not (run_dir / "04-toy/attempt.json").exists()


def test_bad_recipe_fails_before_compute_naming_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "name": "x",
                "model": {"path": "/nope"},
                "stages": [
                    {"kind": "grpo", "name": "math", "data": "m.jsonl", "thinking": "sometimes", "temperature": 0}
                ],
            }
        )
    )
    result = cascade_cli("run", str(bad), "--out", str(tmp_path / "run"))
    assert result.returncode == 2
    assert "stages[0] (math).thinking" in result.stderr and "'think', 'no_think' or 'half'" in result.stderr
    assert "stages[0] (math).temperature" in result.stderr
    assert not (tmp_path / "run").exists()


def test_dry_run_json_prints_the_resolved_recipe(recipe_file):
    result = cascade_cli("run", str(recipe_file), "--dry-run", "--json")
    resolved = json.loads(result.stdout)
    rlhf = resolved["stages"][2]
    assert rlhf["kind"] == "grpo" and rlhf["domain"] == "preference" and rlhf["thinking"] == "half"
    assert rlhf["reward_options"]["preference"]["reward_model"] == "@rm"
    assert rlhf["temperature"] == 0.6
    plan = cascade_cli("run", str(recipe_file), "--dry-run")
    assert "rlhf" in plan.stdout and "half" in plan.stdout


def test_eval_command_resolves_run_variables_in_benchmark_paths(recipe_file, tmp_path, tiny_checkpoint):
    recipe = yaml.safe_load(recipe_file.read_text())
    run_dir = tmp_path / "some-run"
    (run_dir / "world").mkdir(parents=True)
    (run_dir / "world" / "bench.jsonl").write_text(Path(recipe["eval"]["benchmarks"][0]["data"]).read_text())
    recipe["eval"]["benchmarks"][0]["data"] = "${world}/bench.jsonl"
    recipe_file.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "eval-out"
    result = cascade_cli(
        "eval", str(tiny_checkpoint), "--recipe", str(recipe_file), "--run", str(run_dir), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((out / "eval.json").read_text())["toy-sum"]["prompts"] == 4


def test_eval_of_one_benchmark_keeps_the_other_results_in_its_out(recipe_file, tmp_path, tiny_checkpoint):
    out = tmp_path / "01-stage"
    out.mkdir()
    earlier = {"toy-other": {"name": "toy-other", "value": 12.5, "prompts": 8}, "toy-sum": {"prompts": 99}}
    (out / "eval.json").write_text(json.dumps(earlier))
    result = cascade_cli("eval", str(tiny_checkpoint), "--recipe", str(recipe_file), "-b", "toy-sum", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    merged = json.loads((out / "eval.json").read_text())
    assert merged["toy-other"] == earlier["toy-other"]  # kept as it was
    assert merged["toy-sum"]["prompts"] == 4  # redone
    assert "kept the earlier results" in result.stderr and "toy-other" in result.stderr


def test_a_reward_server_that_never_comes_up_fails_before_the_stage_trains(recipe_file, tmp_path):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    recipe = yaml.safe_load(recipe_file.read_text())
    recipe["runtime"]["server_wait_s"] = 2
    recipe["stages"] = [
        {**recipe["stages"][2], "reward_options": {"preference": {"reward_model": f"http://127.0.0.1:{port}"}}}
    ]
    path = tmp_path / "served.yaml"
    path.write_text(yaml.safe_dump(recipe))
    result = cascade_cli("run", str(path), "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "stages (rlhf).reward_options.preference.reward_model" in result.stderr
    assert f"127.0.0.1:{port}" in result.stderr
    assert not list((tmp_path / "run").glob("01-rlhf/substage-1/trainer/*"))  # nothing trained


def test_a_step_that_cannot_split_over_the_processes_is_named_before_compute(recipe_file, tmp_path):
    from cascade_rl.train.cascade import check_process_layout

    recipe = load_recipe(recipe_file)
    check_process_layout(recipe, 2)  # 2 prompts x 2 rollouts split over 2 processes
    with pytest.raises(RecipeError, match=r"stages \(rlhf\).prompts_per_batch: 2 is not divisible by the 4 processes"):
        check_process_layout(recipe, 4)
    recipe.stages[2] = recipe.stages[2].model_copy(update={"per_device_batch_size": 3})  # as one process it fits
    with pytest.raises(
        RecipeError, match=r"stages \(rlhf\).per_device_batch_size: 3 does not divide the 2 completions"
    ):
        check_process_layout(recipe, 2)


def test_a_missing_data_file_of_a_later_stage_fails_before_any_compute(recipe_file, tmp_path):
    recipe = yaml.safe_load(recipe_file.read_text())
    recipe["stages"][3]["data"] = str(tmp_path / "missing.jsonl")
    path = tmp_path / "missing.yaml"
    path.write_text(yaml.safe_dump(recipe))
    result = cascade_cli("run", str(path), "--out", str(tmp_path / "run"))
    assert result.returncode == 2
    assert "stages[3] (toy).data[0].path: data file not found" in result.stderr and "missing.jsonl" in result.stderr
    assert not (tmp_path / "run" / "01-sft").exists()  # no stage started


def test_keep_chat_template_without_one_fails_before_any_compute(recipe_file, tmp_path, tiny_checkpoint):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(tiny_checkpoint, bare)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    recipe = yaml.safe_load(recipe_file.read_text())
    recipe["model"] = {"path": str(bare), "chat_template": "keep"}
    path = tmp_path / "keep.yaml"
    path.write_text(yaml.safe_dump(recipe))
    result = cascade_cli("run", str(path), "--out", str(tmp_path / "run"))
    assert result.returncode == 2
    assert "model.chat_template: keep" in result.stderr and str(bare) in result.stderr
    assert not (tmp_path / "run" / "01-sft").exists()


def test_before_first_stage_evaluates_the_base_model_once(recipe_file, tmp_path, monkeypatch):
    """eval.before_first_stage: 00-base is evaluated before the first stage (the report's
    base-model row, with paired changes to the first stage) and not again on --resume."""
    monkeypatch.syspath_prepend(str(TESTS))
    recipe = yaml.safe_load(recipe_file.read_text())
    recipe["eval"]["before_first_stage"] = True
    recipe["stages"] = recipe["stages"][3:]  # the toy GRPO stage only
    recipe["stages"][0]["domain"] = "tiny_assets:contains_answer"
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run_dir = tmp_path / "run"
    report = Cascade(load_recipe(path), run_dir, echo=lambda _: None).run()
    base = json.loads((run_dir / "00-base" / "stage.json").read_text())
    assert base["status"] == "done" and base["kind"] == "eval" and base["index"] == 0
    assert "toy-sum" in json.loads((run_dir / "00-base" / "eval.json").read_text())
    summary = json.loads(report.with_suffix(".json").read_text())
    assert "toy-sum" in summary["baseline"]
    assert "base model" in (run_dir / "report.md").read_text()
    stamp = (run_dir / "00-base" / "eval.json").stat().st_mtime_ns
    Cascade(load_recipe(path), run_dir, echo=lambda _: None).run(resume=True)
    assert (run_dir / "00-base" / "eval.json").stat().st_mtime_ns == stamp


def test_sample_dtype_loads_evaluation_weights_apart_from_training(recipe_file, tmp_path, monkeypatch):
    """model.sample_dtype: training keeps model.dtype (float32 here, so small Adam steps survive)
    while the evaluation loads the weights in bfloat16; without it both use model.dtype."""
    import cascade_rl.eval.benchmarks as benchmarks

    monkeypatch.syspath_prepend(str(TESTS))
    asked: list[str | None] = []
    monkeypatch.setattr(benchmarks, "evaluate", lambda *args, **kwargs: asked.append(kwargs["settings"].dtype))
    recipe = yaml.safe_load(recipe_file.read_text())
    recipe["model"].update(dtype="float32", sample_dtype="bfloat16")
    recipe["eval"]["before_first_stage"] = True
    recipe["stages"] = recipe["stages"][3:]
    recipe["stages"][0]["domain"] = "tiny_assets:contains_answer"
    path = tmp_path / "dtypes.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run_dir = tmp_path / "run"
    Cascade(load_recipe(path), run_dir, echo=lambda _: None).run()
    assert asked == ["bfloat16", "bfloat16"]  # the base model and the stage's model
    trained = json.loads((run_dir / "01-toy" / "model" / "config.json").read_text())
    assert trained.get("dtype", trained.get("torch_dtype")) == "float32"
    recipe["model"].pop("sample_dtype")
    path.write_text(yaml.safe_dump(recipe))
    assert load_recipe(path).model.sampling_dtype == "float32"


def test_a_stage_in_which_no_group_had_variance_is_said_to_have_learned_nothing(tmp_path, tiny_checkpoint, monkeypatch):
    """Every rollout scores 0 (the answer never appears): no group has variance, no step learns;
    the stage's console summary and the report say so (issue 42)."""
    monkeypatch.syspath_prepend(str(TESTS))
    rows = write_jsonl(tmp_path / "rows.jsonl", [{"prompt": f"say {i}", "answer": "never-said-zz"} for i in range(4)])
    recipe = {
        "name": "idle",
        "model": {"path": str(tiny_checkpoint)},
        "runtime": {"reward_workers": 1},
        "eval": {"decontaminate": False},
        "stages": [
            {
                "kind": "grpo",
                "name": "idle",
                "data": rows,
                "domain": "tiny_assets:contains_answer",
                "rollouts_per_prompt": 2,
                "prompts_per_batch": 2,
                "curriculum": [{"max_response_length": 4, "max_steps": 2}],
            }
        ],
    }
    said: list[str] = []
    report = Cascade(load_recipe_dict(tmp_path, recipe), tmp_path / "run", echo=said.append).run()
    warning = "warning: idle learned nothing: in all 2 logged steps every group's rollouts scored alike"
    assert any(line.startswith(warning) for line in said), said
    assert "⚠ idle learned nothing" in report.read_text()


def load_recipe_dict(tmp_path, recipe):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return load_recipe(path)


def test_a_side_branch_trains_from_its_stage_and_the_cascade_goes_on_without_it(recipe_file, tmp_path, monkeypatch):
    """Cascade 2's RLHF teacher is an RLHF run from SFT: a stage with ``branch_from: sft`` trains
    from the SFT checkpoint and is evaluated on its own checkpoint; the next stage starts from the
    policy before the branch; the report compares the branch with SFT and the next stage with the
    stage before the branch; a MOPD teacher may name the branch; --resume keeps all of it."""
    monkeypatch.syspath_prepend(str(TESTS))
    recipe = yaml.safe_load(recipe_file.read_text())
    side = {**recipe["stages"][2], "name": "side", "branch_from": "sft", "domain": "preference"}
    recipe["stages"].insert(3, side)
    recipe["eval"]["benchmarks"][0]["k"] = 4
    recipe_file.write_text(yaml.safe_dump(recipe))
    started, evaluated = {}, {}  # the last policy each stage was given, and evaluated
    context, evaluate = Cascade.context, Cascade._evaluate

    def spied_context(self, p, handover):
        started[p.stage.name] = handover.policy
        return context(self, p, handover)

    def spied_evaluate(self, stage, stage_dir, handover):
        evaluated[stage.name] = handover.policy
        return evaluate(self, stage, stage_dir, handover)

    monkeypatch.setattr(Cascade, "context", spied_context)
    monkeypatch.setattr(Cascade, "_evaluate", spied_evaluate)
    run_dir = tmp_path / "run"
    lines = []
    Cascade(load_recipe(recipe_file), run_dir, echo=lines.append).run()
    assert "[4/5] grpo side (a branch from sft)" in lines
    assert started["side"] == run_dir / "01-sft/model" and started["toy"] == run_dir / "03-rlhf/model"
    assert evaluated["side"] == run_dir / "04-side/model" and evaluated["toy"] == run_dir / "05-toy/model"
    status = json.loads((run_dir / "04-side/stage.json").read_text())
    assert status["branch_from"] == "sft" and status["policy"] == "03-rlhf/model"  # what the next stage gets

    from cascade_rl.eval.forgetting import stage_changes
    from cascade_rl.eval.runs import summarize_run

    summary = summarize_run(run_dir)
    names, changes = stage_changes(summary)
    scores = {r.name: r.eval["toy-sum"] for r in summary.rows if r.eval}
    delta = {name: row[0].delta for name, row in zip(names, changes) if row[0] is not None}
    assert delta["side"] == pytest.approx(scores["side"] - scores["sft"])
    assert delta["toy"] == pytest.approx(scores["toy"] - scores["rlhf"])

    chat = write_jsonl(tmp_path / "chat.jsonl", [{"prompt": "say hi", "domain": "preference"}] * 2)
    mopd = {
        "kind": "distill",
        "name": "mopd",
        "data": chat,
        "teachers": {"preference": "side"},
        "rollouts_per_prompt": 2,
        "prompts_per_batch": 2,
        "max_response_length": 5,
        "max_steps": 1,
        "eval": [],
    }
    recipe["stages"].append(mopd)  # a teacher may be the branch
    recipe_file.write_text(yaml.safe_dump(recipe))
    started.clear()
    Cascade(load_recipe(recipe_file), run_dir, echo=lines.append).run(resume=True)
    assert started["mopd"] == run_dir / "05-toy/model"  # after the branch, the main line
    assert sum("finished earlier, skipped" in line for line in lines) == 5
    teacher = json.loads((run_dir / "06-mopd/distill.json").read_text())["teachers"]["preference"]
    assert teacher["source"] == str(run_dir / "04-side" / "model")
