"""A GRPO step's rewards over several processes (SPEC sections 5-6): the reward function scores
this process's rollouts; rewards that depend on other rollouts are finished over the step's whole
batch, every process's rollouts together."""

import json
import math
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from reward_model_assets import build_reward_model
from transformers import AutoTokenizer

from cascade_rl.train.rewards import (
    ScoredBatch,
    VerifierFailure,
    check_masked_share,
    reason_kind,
    report_metrics,
    score_step,
)
from cascade_rl.train.verification import RolloutScorer


@pytest.fixture(scope="module")
def rm_path(tmp_path_factory):
    return build_reward_model(tmp_path_factory.mktemp("rm"))


def encode(tokenizer, texts):
    return [tokenizer.encode(t, add_special_tokens=False) + [tokenizer.eos_token_id] for t in texts]


class Processes:
    """``count`` processes in threads, each with the gather torch.distributed would give it."""

    def __init__(self, count: int):
        self.count, self.slots, self.barrier = count, [None] * count, threading.Barrier(count)

    def gather(self, rank: int):
        def gather(mine):
            self.slots[rank] = mine
            self.barrier.wait()
            everyone = list(self.slots)
            self.barrier.wait()
            return everyone

        return gather

    def run(self, work):
        """``work(rank, gather)`` on every process at once; their results in rank order."""
        results = [None] * self.count
        with ThreadPoolExecutor(self.count) as pool:
            futures = [pool.submit(lambda r=r: work(r, self.gather(r))) for r in range(self.count)]
            for rank, future in enumerate(futures):
                results[rank] = future.result(timeout=120)
        return results


def scored_steps(tokenizer, prompts, texts, references, domain, options, group_size, processes):
    """The step as ``processes`` processes run it: each verifies its contiguous slice (its rollouts'
    groups numbered over the global batch), then all finish the whole batch together."""
    ids, refs = encode(tokenizer, texts), [json.dumps(r) for r in references]
    size = len(texts) // processes
    scorer = RolloutScorer(tokenizer, domain=domain, options=options)

    def step(rank, gather):
        part = slice(rank * size, (rank + 1) * size)
        groups = [i // group_size for i in range(len(texts))][part]
        local = scorer(prompts[part], ids[part], _ref=refs[part], _pidx=list(range(len(texts)))[part],
                       groups=groups, group_size=group_size)  # fmt: skip
        return score_step(local, gather=gather, group_size=group_size, options=options, rank=rank)

    batches = Processes(processes).run(step)
    assert all(batch.rewards == batches[0].rewards for batch in batches)  # the same on every process
    return batches[0]


def two_processes(tokenizer, prompts, texts, references, domain, options, group_size):
    return scored_steps(tokenizer, prompts, texts, references, domain, options, group_size, 2).rewards


def one_process(tokenizer, prompts, texts, references, domain, options, group_size, log_metric=None):
    batch = scored_steps(tokenizer, prompts, texts, references, domain, options, group_size, 1)
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


def judge_requests(judge_url: str) -> int:
    with urllib.request.urlopen(judge_url.removesuffix("/v1") + "/stats", timeout=5) as answer:
        return json.loads(answer.read())["requests"]


def test_a_group_split_over_processes_is_judged_once_whole(tiny_checkpoint, judge_url):
    """A pairwise judge's group of 4 held 2 + 2 by two processes: judged once, by one process,
    with all four responses -- the rewards of one process, and the judge calls of one group."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    prompts = [[{"role": "user", "content": "Say something."}]] * 4
    texts = ["a quality=5", "b quality=1", "c quality=3", "d quality=2"]
    options = {"genrm": {"judge": f"{judge_url}#judge"}}
    before = judge_requests(judge_url)
    single = scored_steps(tokenizer, prompts, texts, [{}] * 4, "genrm", options, 4, 1)
    assert judge_requests(judge_url) - before == 4  # circular pairs over the 4: one call each
    split = scored_steps(tokenizer, prompts, texts, [{}] * 4, "genrm", options, 4, 2)
    assert judge_requests(judge_url) - before == 8  # once more, not once per process nor per half
    # (0,1): 5 vs 1; (1,2): 1 vs 3; (2,3): 3 vs 2; (3,0): 2 vs 5
    assert split.rewards == single.rewards == [5.0, 1.0, 3.0, 2.0]
    assert split.calls["genrm"]["judge_calls"] == single.calls["genrm"]["judge_calls"] == 4.0
    assert split.calls["genrm"]["calls"] == 1.0  # one group scorer call


def test_rollouts_without_a_verdict_are_out_of_the_batch_minimum_and_counted(rm_path, tiny_checkpoint):
    """The RLHF batch floor over the rollouts that have an RM score; a rollout whose RM server is
    down has no verdict (reward None), counted per domain and reason."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    prompts = [[{"role": "user", "content": "Say hello."}]] * 2
    dead = {"preference": {"reward_model": "http://127.0.0.1:9", "max_retries": 0, "timeout": 2}}
    batch = scored_steps(tokenizer, prompts, ["hello", "hello 你好"], [{}] * 2, "preference", dead, 2, 1)
    assert batch.rewards == [None, None]
    assert batch.masked_counts() == {"preference": {"reward_model_server": 2}}
    logged = {}
    report_metrics(batch, logged.__setitem__)
    assert logged["masked/preference/reward_model_server"] == 2.0 and logged["rollouts/masked"] == 2.0
    assert logged["overlong/skipped"] == 0.0 and logged["rollouts/scored"] == 0.0


def test_a_step_mostly_without_verdicts_stops_the_stage_with_its_causes():
    def batch(masked):
        return ScoredBatch([None if m else 1.0 for m in masked], ["code"] * 4, ["think"] * 4, [0] * 4,
                           [False] * 4, [3] * 4, masked=list(masked))  # fmt: skip

    check_masked_share(batch([None, None, "sandbox failed: died", None]), 0.5, step=3)
    check_masked_share(batch(["sandbox failed: died", "sandbox failed: died", None, None]), 0.5, step=3)
    with pytest.raises(VerifierFailure) as error:
        check_masked_share(batch(["sandbox failed: the server died", "sandbox failed: x", "judge failed: y", None]),
                           0.5, step=7)  # fmt: skip
    message = str(error.value)
    assert message.startswith("step 7: 3 of 4 rollouts (75%) have no verdict, more than max_masked_share 0.5")
    assert "code: 2 x 'sandbox failed: the server died'" in message and "code: 1 x 'judge failed: y'" in message
    check_masked_share(batch(["a: b"] * 4), 1.0, step=1)  # 1 = never stop


def test_a_reason_is_named_by_its_text_before_the_first_colon():
    assert reason_kind("sandbox failed: the server died: 9") == "sandbox_failed"
    assert reason_kind("scorer raised ValueError: bad") == "scorer_raised_valueerror"
    assert reason_kind("reward-model server: timed out") == "reward_model_server"
    assert reason_kind("") == "unknown"
