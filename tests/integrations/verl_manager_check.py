"""Run with an interpreter that has verl installed (see tests/integrations/test_verl.py): verl's
own reward managers score a verl dataset written by `cascade data export --to verl` with the
reward function loaded the way verl loads it (``custom_reward_function.path: pkg://...``).
Prints one JSON line: the rewards each manager put at each response's last token."""

import json
import sys
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.reward_manager.batch import BatchRewardManager
from verl.workers.reward_manager.naive import NaiveRewardManager

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tiny_assets import build_tokenizer  # noqa: E402


def batch(tokenizer, rows, responses) -> DataProto:
    prompts = [
        tokenizer.apply_chat_template(list(r["prompt"]), tokenize=False, add_generation_prompt=True) for r in rows
    ]
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    response_ids = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in responses]
    width_p, width_r = max(map(len, prompt_ids)), max(map(len, response_ids))
    pad = tokenizer.pad_token_id
    p = torch.tensor([[pad] * (width_p - len(ids)) + ids for ids in prompt_ids])  # left padded, as verl's rollouts
    r = torch.tensor([ids + [pad] * (width_r - len(ids)) for ids in response_ids])
    mask_p = torch.tensor([[0] * (width_p - len(ids)) + [1] * len(ids) for ids in prompt_ids])
    mask_r = torch.tensor([[1] * len(ids) + [0] * (width_r - len(ids)) for ids in response_ids])
    tensors = {"prompts": p, "responses": r, "attention_mask": torch.cat([mask_p, mask_r], dim=1)}
    non_tensors = {
        "data_source": np.array([row["data_source"] for row in rows], dtype=object),
        "reward_model": np.array([row["reward_model"] for row in rows], dtype=object),
        "extra_info": np.array([dict(row["extra_info"]) for row in rows], dtype=object),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def last_token_rewards(tensor, data) -> list[float]:
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[-1] :].sum(-1)
    return [float(tensor[i, int(n) - 1]) for i, n in enumerate(lengths)]


def main(parquet: str, responses_file: str, workdir: str) -> None:
    import datasets

    rows = list(datasets.load_dataset("parquet", data_files=parquet)["train"])
    responses = json.loads(Path(responses_file).read_text())
    tokenizer = build_tokenizer(Path(workdir))
    data = batch(tokenizer, rows, responses)
    out = {}
    for name, manager in (("naive", NaiveRewardManager), ("batch", BatchRewardManager)):
        function = "compute_score" if name == "naive" else "compute_score_batch"
        section = {"custom_reward_function": {"path": "pkg://cascade_rl.integrations.verl", "name": function}}
        config = OmegaConf.create({**section, "reward": section})  # verl before 0.9 / from 0.9 on
        reward_fn = get_custom_reward_fn(config)
        result = manager(tokenizer, 0, compute_score=reward_fn)(data, return_dict=True)
        out[name] = last_token_rewards(result["reward_tensor"], data)
        out[name + "_masked"] = [bool(m) for m in result["reward_extra_info"]["masked"]]
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
