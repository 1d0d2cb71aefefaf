"""GenRM-RLHF against BT-RLHF on the toy arena (issue 45): the RLHF stage of
``recipes/tiny-cascade2.yaml`` once as the recipe has it (domain ``genrm``, the toy pairwise judge
trained in SFT) and once rewarded by the run's Bradley-Terry reward model (domain ``preference``,
as ``recipes/tiny.yaml``), from the same checkpoint (the run's MOPD stage), same steps, seed and
sampling. Both are measured on toy-arena twice:

* as the run measures it: the BT reward model's win rate against the baseline answers (the SFT
  model's, cached in the run's ``arena/``) -- the judge the BT-RLHF stage optimised, so this
  measure favours BT-RLHF;
* by the GenRM judge: each answer and its baseline judged in both orders (``genrm`` with
  ``strategy: circular`` on a group of two: (0, 1) and (1, 0)); a win when the answer's mean score
  is above the baseline's, a tie half -- the judge GenRM-RLHF optimised, favouring GenRM-RLHF.

Every value is given with its standard error over the 300 prompts, and every change from the
starting checkpoint paired over prompts. Needs a finished run of the recipe (``cascade run
recipes/tiny-cascade2.yaml``, at least through ``rlhf``):

    .venv/bin/python benchmarks/bench_genrm_rlhf.py [--run runs/tiny-cascade2] [--out runs/tiny-cascade2-bt]

The BT run is the finished run's stages before ``rlhf`` linked into ``--out`` and the recipe's
``rlhf`` stage re-run there (``cascade run VARIANT --out OUT --only rlhf``); its wall time is
printed. Results go to ``OUT/genrm_vs_bt.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from cascade_rl.rewards.genrm import score_group
from cascade_rl.world.judge import JUDGE_TEMPLATE

ROOT = Path(__file__).resolve().parents[1]
STAGE = "rlhf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", type=Path, default=ROOT / "recipes" / "tiny-cascade2.yaml")
    parser.add_argument("--run", type=Path, default=Path("runs/tiny-cascade2"))
    parser.add_argument("--out", type=Path, default=Path("runs/tiny-cascade2-bt"))
    args = parser.parse_args()
    stages = [p.name for p in sorted(args.run.iterdir()) if (p / "stage.json").exists()]
    rlhf_dir = next(name for name in stages if name.endswith(f"-{STAGE}"))
    before_dir = stages[stages.index(rlhf_dir) - 1]
    bt_seconds = run_bt_stage(args.recipe, args.run, args.out, stages[: stages.index(rlhf_dir)])
    references = [json.loads(line)["response"] for line in (args.run / "arena" / "toy-arena.references.jsonl").open()]
    prompts = [json.loads(line)["prompt"] for line in (args.run / "world" / "bench_toy-arena.jsonl").open()]
    judge = f"local:{args.run.resolve()}/01-sft/model"
    runs = {
        f"start ({before_dir.split('-', 1)[1]})": args.run / before_dir,
        "GenRM-RLHF": args.run / rlhf_dir,
        "BT-RLHF": args.out / rlhf_dir,
    }
    results = {}
    for label, stage_dir in runs.items():
        samples = [json.loads(line) for line in (stage_dir / "eval-samples" / "toy-arena.jsonl").open()]
        started = time.perf_counter()
        results[label] = {
            "bt": [_game(s["rm_score"], s["baseline_rm_score"]) for s in samples],
            "genrm": genrm_games(samples, prompts, references, judge),
            "genrm_seconds": time.perf_counter() - started,
            "wall_s": json.loads((stage_dir / "stage.json").read_text()).get("wall_s"),
        }
    report(results, bt_seconds, args.out)


def run_bt_stage(recipe: Path, run: Path, out: Path, earlier: list[str]) -> float | None:
    """The recipe's RLHF stage rewarded by the BT reward model, from the run's earlier stages
    (hard links, nothing re-trained); returns its wall time, or None if ``out`` already has it."""
    data = yaml.safe_load(recipe.read_text())
    stage = next(s for s in data["stages"] if s["name"] == STAGE)
    stage["domain"] = "preference"  # the run's latest reward model ('@rm'), as tiny.yaml's RLHF
    stage.pop("reward_options", None)
    out.mkdir(parents=True, exist_ok=True)
    for name in [*earlier, "world", "arena", "machine.json"]:
        source, target = run / name, out / name
        if source.is_dir() and not target.exists():
            shutil.copytree(source, target, copy_function=os.link)
        elif source.is_file() and not target.exists():
            os.link(source, target)
    done = [p for p in out.glob(f"*-{STAGE}/stage.json") if json.loads(p.read_text()).get("status") == "done"]
    if done:
        return None
    variant = out / "recipe-bt.yaml"
    variant.write_text(yaml.safe_dump(data, sort_keys=False))
    cascade = Path(sys.executable).with_name("cascade")
    command = [str(cascade), "run", str(variant), "--out", str(out), "--only", STAGE]
    started = time.perf_counter()
    subprocess.run(command, check=True)
    return time.perf_counter() - started


def genrm_games(samples: list[dict], prompts: list[list[dict]], references: list[str], judge: str) -> list[float]:
    """Each answer against its baseline, judged in both orders by the GenRM judge: 1 a win, 0.5
    a tie, 0 a loss (a comparison the judge failed counts as a tie)."""
    games = []
    for sample in samples:
        prompt = prompts[sample["prompt_index"]]
        group = [{"prompt": prompt, "response": sample["response"]},
                 {"prompt": prompt, "response": references[sample["prompt_index"]]}]  # fmt: skip
        answer, baseline = score_group(group, judge=judge, prompt=JUDGE_TEMPLATE, max_tokens=32)
        games.append(0.5 if answer.reward is None or baseline.reward is None else _game(answer.reward, baseline.reward))
    return games


def _game(value: float, baseline: float) -> float:
    return 1.0 if value > baseline else 0.5 if value == baseline else 0.0


def _mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return 100 * mean, 100 * math.sqrt(variance / n)


def report(results: dict, bt_seconds: float | None, out: Path) -> None:
    start = next(iter(results.values()))
    lines = ["| model | toy-arena by the BT RM | change | by the GenRM judge | change | RLHF wall |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for label, result in results.items():
        cells = []
        for judge in ("bt", "genrm"):
            value, se = _mean_se(result[judge])
            change = _mean_se([a - b for a, b in zip(result[judge], start[judge])])
            cells += [f"{value:.1f} ± {se:.1f}", "" if result is start else f"{change[0]:+.1f} ± {change[1]:.1f}"]
        wall = "" if result is start else f"{result['wall_s']:.0f} s"
        lines.append(f"| {label} | {' | '.join(cells)} | {wall} |")
    genrm_run, bt_run = results["GenRM-RLHF"], results["BT-RLHF"]
    for judge, name in (("bt", "the BT RM"), ("genrm", "the GenRM judge")):
        value, se = _mean_se([a - b for a, b in zip(genrm_run[judge], bt_run[judge])])
        lines.append(f"GenRM-RLHF minus BT-RLHF by {name}: {value:+.1f} ± {se:.1f} (paired over prompts)")
    print("\n".join(lines))
    if bt_seconds is not None:
        print(f"BT-RLHF stage run (training + evaluation): {bt_seconds:.0f} s")
    print("GenRM judging of the arena: " + ", ".join(f"{k} {v['genrm_seconds']:.0f} s" for k, v in results.items()))
    (out / "genrm_vs_bt.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
