"""Cost of a MOPD step over a GRPO step (issue 12): the same tiny student, prompts, batch (16
prompts x 4 responses), sampling, response budget and optimizer, once as a GRPO stage (math
verifier reward) and once as a distill stage whose two domains go to two teachers of the
student's size, local (loaded in the training process) and served (two ``cascade serve
teacher`` processes on loopback). Runs alternate (GRPO, MOPD local, MOPD served)
and the median wall time per step of each is compared; the first step of each run (warm-up) is
left out. The extra cost of a MOPD step is scoring the responses: the teachers' forward passes
and one forward pass of the student (``time/teacher``, ``time/student``).

    .venv/bin/python benchmarks/bench_mopd.py [--steps 6] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402

torch.set_num_threads(1)

from cascade_rl.recipe import parse_recipe  # noqa: E402
from cascade_rl.train.common import read_metrics  # noqa: E402
from cascade_rl.train.context import StageContext  # noqa: E402
from cascade_rl.train.distill import run_distill_stage  # noqa: E402
from cascade_rl.train.grpo import run_grpo_stage  # noqa: E402
from cascade_rl.train.teachers import TeacherSpec  # noqa: E402
from cascade_rl.world.model import build_tiny_model  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from teacher_server import served_teacher  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grpo import TINY_SIZES, addition_tokenizer  # noqa: E402

PROMPTS, ROLLOUTS, MAX_TOKENS = 16, 4, 32


def make_data(root: Path) -> Path:
    rng = random.Random(0)
    rows = []
    for i in range(256):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        rows.append({"prompt": f"What is {a} + {b}?", "answer": str(a + b), "domain": "math", "half": i % 2})
    path = root / "rl.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_models(root: Path, data: Path) -> dict[str, Path]:
    tokenizer = addition_tokenizer(data)
    paths = {}
    for seed, name in enumerate(("student", "teacher-a", "teacher-b")):
        build_tiny_model(tokenizer, seed=seed, out_dir=root / name, **TINY_SIZES)
        paths[name] = root / name
    return paths


def sampling() -> dict:
    return {
        "thinking": "think",
        "rollouts_per_prompt": ROLLOUTS,
        "prompts_per_batch": PROMPTS,
        "temperature": 1.0,
        "top_p": 1.0,
        "learning_rate": 1e-5,
    }


def grpo(models: dict[str, Path], data: Path, steps: int, out: Path) -> list[dict]:
    stage = {
        "kind": "grpo",
        "name": "bench",
        "data": str(data),
        "domain": "math",
        **sampling(),
        "curriculum": [{"max_response_length": MAX_TOKENS, "overlong_filter": False, "max_steps": steps}],
    }
    recipe = parse_recipe({"name": "b", "model": {"path": "x"}, "runtime": {"reward_workers": 1}, "stages": [stage]})
    run_grpo_stage(
        recipe.stages[0], StageContext.settle(policy=models["student"], stage_dir=out, runtime=recipe.runtime, seed=0)
    )
    return read_metrics(out / "metrics.jsonl")


def mopd(models: dict[str, Path], data: Path, steps: int, out: Path, teachers: dict[str, str]) -> list[dict]:
    """Two domains (the prompts split in halves), each with its own teacher."""
    split = out.parent / f"{out.name}-data.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    split.write_text("".join(json.dumps({**r, "domain": "ab"[r["half"]]}) + "\n" for r in rows))
    stage = {
        "kind": "distill",
        "name": "bench",
        "data": str(split),
        "teachers": teachers,
        **sampling(),
        "max_response_length": MAX_TOKENS,
        "max_steps": steps,
    }
    recipe = parse_recipe({"name": "b", "model": {"path": "x"}, "stages": [stage]})
    specs = {domain: TeacherSpec(domain, source, source) for domain, source in teachers.items()}
    run_distill_stage(
        recipe.stages[0],
        StageContext.settle(policy=models["student"], stage_dir=out, runtime=recipe.runtime, seed=0),
        specs,
    )
    return read_metrics(out / "metrics.jsonl")


def median(metrics: list[dict], key: str) -> float:
    return statistics.median(m.get(key, 0.0) for m in metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args()
    runs: dict[str, list[dict]] = {"GRPO": [], "MOPD, local teachers": [], "MOPD, served teachers": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = make_data(root)
        models = make_models(root, data)
        local = {"a": str(models["teacher-a"]), "b": str(models["teacher-b"])}
        with served_teacher(models["teacher-a"], name="a") as a, served_teacher(models["teacher-b"], name="b") as b:
            served = {"a": f"{a}/v1#a", "b": f"{b}/v1#b"}
            for repeat in range(options.repeats):
                runs["GRPO"] += grpo(models, data, options.steps, root / f"grpo-{repeat}")[1:]
                runs["MOPD, local teachers"] += mopd(models, data, options.steps, root / f"local-{repeat}", local)[1:]
                runs["MOPD, served teachers"] += mopd(models, data, options.steps, root / f"served-{repeat}", served)[
                    1:
                ]
    baseline = median(runs["GRPO"], "time/step")
    print(
        f"One step: {PROMPTS} prompts x {ROLLOUTS} responses, <= {MAX_TOKENS} tokens, tiny Qwen3 (4 layers, 128 wide)"
    )
    print(f"{'':24}{'s/step':>8}{'generation':>12}{'teachers':>10}{'student':>9}{'ratio':>8}")
    for name, metrics in runs.items():
        step = median(metrics, "time/step")
        print(
            f"{name:24}{step:8.3f}{median(metrics, 'time/generation'):12.3f}{median(metrics, 'time/teacher'):10.3f}"
            f"{median(metrics, 'time/student'):9.3f}{step / baseline:8.2f}x"
        )
    print(f"(medians over {len(runs['GRPO'])} steps per row; ratio against the GRPO step measured in the same run)")


if __name__ == "__main__":
    main()
