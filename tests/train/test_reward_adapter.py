"""The GRPO reward adapter over several processes (SPEC sections 5-6): rewards that depend on
other rollouts are taken over the step's whole batch, every process's rollouts together."""

import json
import math

import pytest
from reward_model_assets import build_reward_model
from transformers import AutoTokenizer

from cascade_rl.train.reward_adapter import CascadeReward


@pytest.fixture(scope="module")
def rm_path(tmp_path_factory):
    return build_reward_model(tmp_path_factory.mktemp("rm"))


def encode(tokenizer, texts):
    return [tokenizer.encode(t, add_special_tokens=False) + [tokenizer.eos_token_id] for t in texts]


def two_processes(tokenizer, prompts, texts, references, domain, **options):
    """The adapter as two processes run it: each scores its half, the gather hands both halves
    to both, and each returns the rewards of its own half."""
    ids, refs, indices = encode(tokenizer, texts), [json.dumps(r) for r in references], list(range(len(texts)))
    halves = [slice(0, len(texts) // 2), slice(len(texts) // 2, None)]
    adapters = [CascadeReward(tokenizer, domain=domain, rank=rank, **options) for rank in (0, 1)]
    local = [a._score_local(prompts[h], ids[h], refs[h], indices[h], None, None) for a, h in zip(adapters, halves)]
    rewards = []
    for adapter, half in zip(adapters, halves):
        adapter.gather = lambda _mine: local
        rewards += adapter(prompts[half], [None] * len(ids[half]), ids[half], refs[half], indices[half])
    return rewards


def one_process(tokenizer, prompts, texts, references, domain, **options):
    adapter = CascadeReward(tokenizer, domain=domain, **options)
    ids = encode(tokenizer, texts)
    return adapter(prompts, [None] * len(ids), ids, [json.dumps(r) for r in references], list(range(len(ids))))


def test_language_penalty_floor_is_the_whole_batch_minimum(rm_path, tiny_checkpoint):
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    prompts = [[{"role": "user", "content": "Say hello."}]] * 4
    texts = ["hello world", "hello there, fine thanks", "how are you today", "hello 你好世界 你好"]
    options = {"options": {"preference": {"reward_model": str(rm_path)}}, "group_size": 2}
    single = one_process(tokenizer, prompts, texts, [{}] * 4, "preference", **options)
    split = two_processes(tokenizer, prompts, texts, [{}] * 4, "preference", **options)
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
    options = {"options": {"if_rm": {"reward_model": str(rm_path)}}, "group_size": 4}  # one group of 4: 2 + 2
    single = one_process(tokenizer, prompts, texts, [reference] * 4, "if_rm", **options)
    split = two_processes(tokenizer, prompts, texts, [reference] * 4, "if_rm", **options)
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
    adapter = CascadeReward(tokenizer, domain="swe", group_size=4)
    ids = encode(tokenizer, texts)
    refs = [json.dumps({"files": files, "golden_patch": golden})] * 4
    prompts = [[{"role": "user", "content": "Fix it."}]] * 4
    rewards = adapter(prompts, [None] * 4, ids, refs, list(range(4)), log_metric=logged.__setitem__)
    assert rewards[0] == 1.0 and rewards[2] == rewards[3] == -1.0
    assert logged["reward/swe/applied"] == pytest.approx(0.5)
    assert logged["reward/swe/identical"] == pytest.approx(0.25)
    assert "reward/swe/similarity" in logged and "reward/swe/kind" not in logged
