"""The execution-free SWE repair reward (rewards/swe.py, SPEC section 6)."""

import json

import pytest

from cascade_rl.rewards.registry import get_domain, score_batch
from cascade_rl.rewards.swe import lexical_similarity, patch_key, score
from cascade_rl.rewards.swe_edits import unified_diff

FILES = {
    "pkg/calc.py": ("import math\n\n\ndef add(a, b):\n    return a - b\n\n\ndef area(r):\n    return 3.14 * r * r\n"),
    "pkg/util.py": "VALUE = 1\n",
}
# the golden patch as git writes it (an index line, a function-name hunk header)
GOLDEN = """diff --git a/pkg/calc.py b/pkg/calc.py
index 3b18e51..a9c5d2f 100644
--- a/pkg/calc.py
+++ b/pkg/calc.py
@@ -2,7 +2,7 @@ import math
 
 
 def add(a, b):
-    return a - b
+    return a + b
 
 
 def area(r):
"""


def answer(*edits, think="<think>look at add</think>"):
    blocks = "".join(
        f"```diff\n### {path}\n<<<<<<< SEARCH\n{s}=======\n{r}>>>>>>> REPLACE\n```\n" for path, s, r in edits
    )
    return f"{think}\n<solution>\n{blocks}</solution>"


FIX = ("pkg/calc.py", "    return a - b\n", "    return a + b\n")


class FakeJudge:
    """A judge at the protocol boundary: returns a fixed P(YES) and records what it saw."""

    def __init__(self, probability):
        self.probability, self.seen = probability, []

    def probability_yes(self, messages):
        self.seen.append(messages)
        return self.probability


def test_identical_to_golden_scores_one_despite_context_and_whitespace():
    result = score(answer(FIX), files=FILES, golden_patch=GOLDEN)
    assert result.reward == 1.0 and result.details["kind"] == "identical"
    assert "+    return a + b\n" in result.details["patch"]
    # trailing whitespace and an extra blank line are whitespace-only differences
    sloppy = ("pkg/calc.py", "    return a - b\n", "    return a + b   \n\n")
    assert score(answer(sloppy), files=FILES, golden_patch=GOLDEN).reward == 1.0
    # a golden patch with 1 line of context and no git headers is the same change
    terse = (
        "--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ -4,3 +4,3 @@\n def add(a, b):\n-    return a - b\n"
        "+    return a + b\n \n"
    )
    assert score(answer(FIX), files=FILES, golden_patch=terse).reward == 1.0


def test_no_op_scores_zero():
    same = ("pkg/calc.py", "    return a - b\n", "    return a - b\n")
    result = score(answer(same), files=FILES, golden_patch=GOLDEN)
    assert (result.reward, result.details["kind"], result.details["patch"]) == (0.0, "no_op", "")


@pytest.mark.parametrize(
    "response, error",
    [
        ("<think>still thinking about add", "unfinished thinking"),
        ("<think>x</think>I would change the sign.", "no SEARCH/REPLACE edit"),
        (answer(("pkg/calc.py", "    return a * b\n", "x\n")), "SEARCH text not found"),
        (answer(("pkg/missing.py", "x\n", "y\n")), "file not found"),
    ],
)
def test_unparseable_or_inapplicable_scores_minus_one(response, error):
    result = score(response, files=FILES, golden_patch=GOLDEN)
    assert result.reward == -1.0 and result.details["kind"] == "unparseable"
    assert error in result.details["reason"] and "error" not in result.details


def test_lexical_similarity_ranks_closer_fixes_higher():
    near = score(answer(("pkg/calc.py", "    return a - b\n", "    return b + a\n")), files=FILES, golden_patch=GOLDEN)
    far = score(
        answer(("pkg/calc.py", "    return 3.14 * r * r\n", "    return math.pi * r ** 2\n")),
        files=FILES,
        golden_patch=GOLDEN,
    )
    both = score(answer(FIX, ("pkg/util.py", "VALUE = 1\n", "VALUE = 2\n")), files=FILES, golden_patch=GOLDEN)
    assert near.details["kind"] == far.details["kind"] == both.details["kind"] == "similar"
    assert 0.5 < near.reward < 1.0
    assert 0.0 < far.reward < near.reward
    # the extra file scores 0 and halves the mean; the shared file is identical (ratio 1)
    assert both.reward == pytest.approx(0.5)


def test_lexical_similarity_is_mean_over_union_of_files():
    calc = unified_diff(FILES, {"pkg/calc.py": FILES["pkg/calc.py"].replace("a - b", "a + b")})
    util = unified_diff(FILES, {"pkg/util.py": "VALUE = 2\n"})
    assert lexical_similarity(calc, calc) == 1.0
    assert lexical_similarity(calc + util, calc) == 0.5
    assert lexical_similarity(util, calc) == 0.0


def test_shaping_zeroes_low_similarity_only():
    far = answer(("pkg/calc.py", "    return 3.14 * r * r\n", "    return math.pi * r ** 2\n"))
    shaped = score(far, files=FILES, golden_patch=GOLDEN, shaping=True)
    assert shaped.reward == 0.0 and 0 < shaped.details["similarity"] < 0.5
    assert score("<think>x</think>no edits", files=FILES, golden_patch=GOLDEN, shaping=True).reward == -1.0


def test_semantic_similarity_asks_the_judge_with_the_appendix_prompt():
    judge = FakeJudge(0.83)
    near = answer(("pkg/calc.py", "    return a - b\n", "    return b + a\n"))
    result = score(
        near,
        files=FILES,
        golden_patch=GOLDEN,
        similarity="semantic",
        judge=judge,
        prompt=[{"role": "user", "content": "Fix add(). REPAIR PROMPT /think"}],
    )
    assert result.reward == pytest.approx(0.83) and result.details["kind"] == "similar"
    system, user = judge.seen[0]
    assert system["role"] == "system" and "<judgement>YES</judgement>" in system["content"]
    assert user["content"].startswith("Fix add(). REPAIR PROMPT")
    assert "/think" not in user["content"]
    assert GOLDEN in user["content"] and "+    return b + a" in user["content"]
    # identical, no-op and unparseable answers never reach the judge
    score(answer(FIX), files=FILES, golden_patch=GOLDEN, similarity="semantic", judge=judge)
    assert len(judge.seen) == 1
    # without a prompt, the judge sees the repair prompt rebuilt from the files
    score(
        near, files=FILES, golden_patch=GOLDEN, similarity="semantic", judge=judge, problem_statement="add() subtracts"
    )
    assert "add() subtracts" in judge.seen[1][1]["content"] and "### pkg/calc.py" in judge.seen[1][1]["content"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"similarity": "semantic"}, "needs a judge"),
        ({"similarity": "cosine"}, "similarity must be"),
        ({"golden_patch": "   "}, "non-empty"),
        ({"files": ["pkg/calc.py"]}, "files must map"),
        ({"files": "{not json"}, "not JSON"),
        ({"similarity": "semantic", "judge": FakeJudge(1.5)}, "expected a probability"),
    ],
)
def test_bad_references_and_options_raise_clear_errors(kwargs, message):
    arguments = {"files": FILES, "golden_patch": GOLDEN, **kwargs}
    near = answer(("pkg/calc.py", "    return a - b\n", "    return b + a\n"))
    with pytest.raises(ValueError, match=message):
        score(near, **arguments)


def test_golden_patch_that_does_not_apply_falls_back_to_changed_lines():
    stale = GOLDEN.replace("@@ -2,7 +2,7 @@", "@@ -40,7 +40,7 @@")
    assert score(answer(FIX), files=FILES, golden_patch=stale).reward < 1.0  # lines moved: different change
    other_files = {"pkg/calc.py": FILES["pkg/calc.py"].replace("import math", "import cmath")}
    result = score(answer(FIX), files=other_files, golden_patch=GOLDEN)
    assert result.details["kind"] == "identical"  # same changed lines, context differs


def test_patch_key_ignores_context_size_and_hunk_split():
    after = FILES["pkg/calc.py"].replace("a - b", "a + b").replace("3.14", "math.pi")
    wide = unified_diff(FILES, {"pkg/calc.py": after}, context=3)
    split = unified_diff(FILES, {"pkg/calc.py": after}, context=0)
    assert wide.count("@@ -") == 1 and split.count("@@ -") == 2
    assert patch_key(wide) == patch_key(split)
    assert patch_key(wide) != patch_key(GOLDEN)


def test_registry_routes_swe_rows_and_json_encoded_files():
    rows = [
        {"response": answer(FIX), "files": json.dumps(FILES), "golden_patch": GOLDEN, "domain": "swe"},
        {"response": "<think>x</think>nothing", "files": FILES, "golden_patch": GOLDEN},
    ]
    rewards = [s.reward for s in score_batch(get_domain("swe"), rows)]
    assert rewards == [1.0, -1.0]


def test_semantic_similarity_with_a_real_local_judge_model(tmp_path):
    """The judge given as a spec: a real YesNoJudge over a (random) local toy-world model."""
    from cascade_rl.world.model import build_tiny_model
    from cascade_rl.world.tokenizer import build_tokenizer

    tokenizer = build_tokenizer([GOLDEN, "YES NO <judgement>"] * 3, vocab_size=320)
    build_tiny_model(
        tokenizer,
        out_dir=tmp_path,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=64,
        max_position_embeddings=8192,
    )
    near = answer(("pkg/calc.py", "    return a - b\n", "    return b + a\n"))
    first = score(near, files=FILES, golden_patch=GOLDEN, similarity="semantic", judge=str(tmp_path))
    again = score(near, files=FILES, golden_patch=GOLDEN, similarity="semantic", judge=str(tmp_path))
    assert first.details["kind"] == "similar" and 0.0 < first.reward < 1.0
    assert again.reward == pytest.approx(first.reward)  # same judge, deterministic P(YES)
