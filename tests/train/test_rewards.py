"""A GRPO step's rewards over several processes (SPEC sections 5-6): the reward function scores
this process's rollouts; rewards that depend on other rollouts are finished over the step's whole
batch, every process's rollouts together."""

import json
import math

import pytest
from reward_model_assets import build_reward_model
from transformers import AutoTokenizer

from cascade_rl.train.rewards import RolloutScorer, report_metrics, score_step


@pytest.fixture(scope="module")
def rm_path(tmp_path_factory):
    return build_reward_model(tmp_path_factory.mktemp("rm"))


def encode(tokenizer, texts):
    return [tokenizer.encode(t, add_special_tokens=False) + [tokenizer.eos_token_id] for t in texts]


def two_processes(tokenizer, prompts, texts, references, domain, options, group_size):
    """The step as two processes run it: each scores its half, the gather hands both halves to
    both, and each finishes the whole batch (the same rewards on every process)."""
    ids, refs, indices = encode(tokenizer, texts), [json.dumps(r) for r in references], list(range(len(texts)))
    halves = [slice(0, len(texts) // 2), slice(len(texts) // 2, None)]
    scorer = RolloutScorer(tokenizer, domain=domain, options=options)
    local = [scorer(prompts[h], ids[h], _ref=refs[h], _pidx=indices[h]) for h in halves]
    batches = [score_step(part, gather=lambda _mine: local, group_size=group_size, options=options) for part in local]
    assert batches[0].rewards == batches[1].rewards
    return batches[0].rewards


def one_process(tokenizer, prompts, texts, references, domain, options, group_size, log_metric=None):
    scorer = RolloutScorer(tokenizer, domain=domain, options=options)
    ids = encode(tokenizer, texts)
    local = scorer(prompts, ids, _ref=[json.dumps(r) for r in references], _pidx=list(range(len(ids))))
    batch = score_step(local, gather=lambda mine: [mine], group_size=group_size, options=options)
    if log_metric is not None:
        report_metrics(batch, log_metric)
    return batch.rewards


def test_language_penalty_floor_is_the_whole_batch_minimum(rm_path, tiny_checkpoint):
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    prompts = [[{"role": "user", "content": "Say hello."}]] * 4
    texts = ["hello world", "hello there, fine thanks", "how are you today", "hello 你好世界 你好"]
    options = {"preference": {"reward_model": str(rm_path)}}
    single = one_process(tokenizer, prompts, texts, [{}] * 4, "preference", options, 2)
    split = two_processes(tokenizer, prompts, texts, [{}] * 4, "preference", options, 2)
    assert split == pytest.approx(single)
    # the mixed response sits on "process 1"; its floor comes from the lowest RM score of both halves
    assert split[3] == pytest.approx(min(single[:3]) - 10.0)


def test_if_rm_z_score_spans_a_group_split_over_processes(rm_path, tiny_checkpoint):
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    prompts = [[{"role": "user", "content": "Write hello in lowercase."}]] * 4
    texts = [
        "hello, this is a short answer written in plain lowercase english words.",
        "hello there, my friend, i hope that you are doing well today.",
        "hello and welcome, everything here is written in lowercase english.",
        "hello friend, the weather is fine and the day is long.",
    ]
    reference = {"instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}
    options = {"if_rm": {"reward_model": str(rm_path)}}  # one group of 4: 2 + 2
    single = one_process(tokenizer, prompts, texts, [reference] * 4, "if_rm", options, 4)
    split = two_processes(tokenizer, prompts, texts, [reference] * 4, "if_rm", options, 4)
    assert split == pytest.approx(single)
    assert all(1.0 < r < 2.0 for r in split), split  # every answer follows the instruction: 1 + sigmoid(z)
    z = [math.log((r - 1.0) / (2.0 - r)) for r in split]  # sigmoid^-1
    assert sum(z) == pytest.approx(0.0, abs=1e-6)
    assert not all(abs(abs(value) - 1.0) < 1e-6 for value in z)  # halves of 2 scored alone would give z = +-1


def test_numeric_score_details_are_logged_per_domain(tiny_checkpoint):
    """The SWE reward's ``applied`` / ``identical`` details reach the step's metrics as the share
    of rollouts (DESIGN convention 2), so a run shows edits that apply beside exact fixes."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    files = {"pkg/a.py": "def f(x):\n    return x - 1\n"}
    golden = "--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n"

    def edit(search, replace):
        block = f"### pkg/a.py\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"
        return f"<think>fix</think>```diff\n{block}\n```"

    texts = [edit("    return x - 1", "    return x + 1"), edit("    return x - 1", "    return x * 1"), "no edit", "x"]
    logged = {}
    refs = [{"files": files, "golden_patch": golden}] * 4
    prompts = [[{"role": "user", "content": "Fix it."}]] * 4
    rewards = one_process(tokenizer, prompts, texts, refs, "swe", {}, 4, log_metric=logged.__setitem__)
    assert rewards[0] == 1.0 and rewards[2] == rewards[3] == -1.0
    assert logged["reward/swe/applied"] == pytest.approx(0.5)
    assert logged["reward/swe/identical"] == pytest.approx(0.25)
    assert "reward/swe/similarity" in logged and "reward/swe/kind" not in logged
