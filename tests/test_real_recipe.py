"""The real-model recipe (recipes/smollm2-135m.yaml), shortened: SmolLM2's architecture,
tokenizer and chat template with tiny random weights (head size 32, which vLLM's CPU kernels
take), the public file formats the recipe reads (GSM8K, IFEval, IFBench, MBPP rows written here
in their published schemas), a few prompts, one step per stage. It runs as a user runs it,
`cascade run` with CASCADE_MODELS / CASCADE_REAL_DATA and vLLM where it is installed, so the
real-model path (conversion on read, SFT with rejection-sampled rows on a template without
generation markers, float32 training, the base-model evaluation, no mode flags for a plain
template) stays tested in CI without the 98 MB model."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from cascade_rl.llm.vllm_engine import import_problem

ROOT = Path(__file__).resolve().parents[1]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def real_data(folder: Path) -> Path:
    """A few rows of each public file in its published schema."""
    gsm8k = [
        {"question": f"Tom has {a} apples and buys {a + 2} more. How many apples does he have?",
         "answer": f"Tom has {a} + {a + 2} = <<{a}+{a + 2}={2 * a + 2}>>{2 * a + 2} apples.\n#### {2 * a + 2}"}
        for a in range(1, 10)
    ]  # fmt: skip
    gsm8k[6] = {"question": "A baker fills 7 trays with 9 rolls each before the shop opens. How many rolls are baked?",
                "answer": "7 * 9 = <<7*9=63>>63\n#### 63"}  # fmt: skip
    write_jsonl(folder / "gsm8k" / "train.jsonl", gsm8k[:7])  # the 7th is a test question: decontaminated away
    write_jsonl(folder / "gsm8k" / "test.jsonl", gsm8k[6:])
    ifeval = [
        {"key": 1, "prompt": "Write a short note about the sea. Do not use any commas.",
         "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]},
        {"key": 2, "prompt": "Describe a cat in all lowercase letters.",
         "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]},
        {"key": 3, "prompt": "Name a fruit. Answer with less than 20 words.",
         "instruction_id_list": ["length_constraints:number_words"],
         "kwargs": [{"relation": "less than", "num_words": 20}]},
    ]  # fmt: skip
    write_jsonl(folder / "ifeval" / "input_data.jsonl", ifeval)
    ifbench = [  # IFBench's schema: string keys, every kwarg present (null when unused)
        {"key": "0", "prompt": "Name three rivers. Use at least 2 different coordinating conjunctions.",
         "instruction_id_list": ["count:conjunctions"], "kwargs": [{"small_n": 2.0, "N": None}]},
        {"key": "1", "prompt": "Describe rain. Include the number of days in a week and 2 other numbers.",
         "instruction_id_list": ["count:numbers"], "kwargs": [{"N": 3.0, "small_n": None}]},
        {"key": "2", "prompt": "Tell me about bread. Use the word 'crust' as the last word of the answer.",
         "instruction_id_list": ["words:words_position"], "kwargs": [{"keyword": "crust", "N": None}]},
    ]  # fmt: skip
    write_jsonl(folder / "ifbench" / "IFBench_test.jsonl", ifbench)
    mbpp = [
        {"task_id": task, "text": f"Write a function to add {task} to a number.",
         "code": f"def f(x): return x + {task}", "test_list": [f"assert f(1) == {task + 1}"],
         "test_setup_code": "", "challenge_test_list": []}
        for task in (5, 11, 12, 13, 520, 601, 602, 603, 604)  # prompt, test, validation, train splits
    ]  # fmt: skip
    write_jsonl(folder / "mbpp" / "mbpp.jsonl", mbpp)
    return folder


def shortened(recipe: dict) -> dict:
    for bench in recipe["eval"]["benchmarks"]:
        bench.update(limit=3, max_new_tokens=8)
    recipe["eval"]["batch_size"] = 4
    recipe["runtime"].update(torch_threads=1, reward_workers=1)
    for sub in (sub for stage in recipe["stages"] if stage["kind"] == "sft" for sub in stage["substages"]):
        sub.update(max_steps=2, batch_size=4, per_device_batch_size=2, max_length=256)  # 2 micro-batches a step
        for source in sub["data"]:
            source["limit"] = 2
            if "rejection" in source:
                source["rejection"].update(k=2, max_tokens=8)
    for stage in recipe["stages"]:
        if stage["kind"] == "grpo":
            stage.update(prompts_per_batch=2, rollouts_per_prompt=2, per_device_batch_size=2)  # 2 micro-batches
            stage.pop("prompt_filter", None)
            for source in stage["data"]:
                source.pop("limit", None)
            for step in stage["curriculum"]:
                step.update(max_steps=1, max_response_length=8)
    return recipe


def test_the_real_recipe_shortened_runs_end_to_end(smollm2_tiny_vllm, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "smollm2-135m-instruct").symlink_to(smollm2_tiny_vllm)
    data = real_data(tmp_path / "real-data")
    recipe = shortened(yaml.safe_load((ROOT / "recipes" / "smollm2-135m.yaml").read_text()))
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "run"
    env = {**os.environ, "CASCADE_MODELS": str(models), "CASCADE_REAL_DATA": str(data), "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", "run", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "OMP_NUM_THREADS": "1", "CASCADE_VLLM": "on"},  # as users run it
    )
    assert result.returncode == 0, result.stderr[-4000:]
    base = json.loads((out / "00-base" / "eval.json").read_text())
    benchmarks = {"ifeval", "ifbench", "gsm8k", "mbpp"}
    assert set(base) == benchmarks and all(r["prompts"] == 3 for r in base.values())
    assert "prompt_strict" in base["ifbench"]["extra"]  # out of distribution, scored like IFEval
    assert "prompt_strict" in base["ifeval"]["extra"]
    names = [stage["name"] for stage in recipe["stages"]]
    for index, name in enumerate(names, start=1):
        status = json.loads((out / f"{index:02d}-{name}" / "stage.json").read_text())
        assert status["status"] == "done"
        model = out / f"{index:02d}-{name}" / "model"
        assert (model / "config.json").exists() and not list(model.glob("adapter_*"))  # a plain checkpoint
    samples = (out / "00-base" / "eval-samples" / "ifeval.jsonl").read_text()
    assert samples.count("\n") == 3
    report = json.loads((out / "report.json").read_text())
    assert [s["stage"] for s in report["stages"]] == names and set(report["baseline"]) == benchmarks
    # IFEval's four levels, each with its error, and the paired change after every stage
    levels = report["ifeval_levels"]["ifeval"]
    assert [row["stage"] for row in levels] == ["base model", *names]
    assert all("change_stderr" in row["levels"]["instruction_loose"] for row in levels[1:])
    # the rows reached the policy through their public formats: IF rows built from GSM8K questions
    data_report = json.loads((out / "02-ifrl" / "data_report.json").read_text())
    assert data_report["kept"] == 6 + 4  # GSM8K train rows + MBPP's train split (601-604)
    assert data_report["skipped"]["shares a 9-gram with gsm8k"] == 1  # the copy of a GSM8K test question
    code_report = json.loads((out / "03-code" / "data_report.json").read_text())
    assert code_report["kept"] == 4 + 1 + 1  # MBPP's train, validation and prompt splits; never its test split
    # SFT: the rejection-sampled IF source was answered by the input model and kept on disk
    sampled = out / "01-sft" / "substage-1" / "rejection-3.jsonl"  # the third source of the first sub-stage
    assert sampled.exists(), sorted(p.name for p in (out / "01-sft").rglob("*"))
    machine = json.loads((out / "machine.json").read_text())
    assert machine["choices"]["use_vllm"] is (import_problem() is None)  # vLLM wherever it is installed
