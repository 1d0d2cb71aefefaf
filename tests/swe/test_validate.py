"""Patch validation in sandboxed throw-away copies: regression, reproduction and gold tests."""

import pytest
from swe_assets import git_state

from cascade_rl.sandbox import Limits, SandboxPool
from cascade_rl.swe.repo import Repository
from cascade_rl.swe.validate import Validator, extract_test_script, parse_pytest_summary

REPRODUCE = """```python
from textkit.words import word_count

def test():
    try:
        count = word_count("one  two")
    except Exception:
        print("Other issues")
        return
    if count == 2:
        print("Issue resolved")
    else:
        print("Issue reproduced")

test()
```"""
ALWAYS_RESOLVED = "```python\nprint('Issue resolved')\n```"
HANGS = "```python\nwhile True:\n    pass\n```"
BREAKS_REGRESSION = """diff --git a/textkit/words.py b/textkit/words.py
--- a/textkit/words.py
+++ b/textkit/words.py
@@ -5,7 +5,7 @@ def word_count(text):
     \"\"\"Number of words in ``text``.\"\"\"
     if not text:
         return 0
-    return len(text.split(" "))
+    return len(text.split()) + 1
 
 
 def longest_word(text):
"""
DOES_NOT_APPLY = BREAKS_REGRESSION.replace('text.split(" ")', 'text.split("-")')


def test_parse_pytest_summary():
    output = """
tests/test_a.py .F
=========================== short test summary info ============================
PASSED tests/test_a.py::test_ok
FAILED tests/test_a.py::test_bad - AssertionError: assert 1 == 2
ERROR tests/test_b.py::test_setup - RuntimeError
XFAIL tests/test_a.py::test_known - reason
SKIPPED [1] tests/test_a.py:9: no network
PASSED tests/test_a.py::test_param[a b]
"""
    assert parse_pytest_summary(output) == {
        "tests/test_a.py::test_ok": "PASSED",
        "tests/test_a.py::test_bad": "FAILED",
        "tests/test_b.py::test_setup": "ERROR",
        "tests/test_a.py::test_known": "XFAIL",
        "tests/test_a.py::test_param[a b]": "PASSED",
    }


@pytest.mark.parametrize(
    "response, expected",
    [
        ("<think>x</think>```python\nprint(1)\n```", "print(1)\n"),
        ("```python\nfirst()\n```\nbetter:\n```python\nsecond()\n```", "second()\n"),
        ("```python\ndef broken(:\n```", None),
        ("<think>```python\nprint(1)\n```", None),
        ("no code", None),
    ],
)
def test_extract_test_script(response, expected):
    assert extract_test_script(response) == expected


def test_validation_in_sandboxed_copies(fixture_checkouts):
    path, instance = fixture_checkouts["textkit"]
    before = git_state(path)
    repo = Repository.open(path, instance["base_commit"])
    pool = SandboxPool(2)
    with Validator(repo, pool=pool, script_limits=Limits(time_s=3)) as validator:
        baseline, seconds = validator.baseline_tests().result()
        assert baseline.passing() == set(instance["PASS_TO_PASS"]) and seconds > 0
        regression = sorted(baseline.passing())

        tests = validator.check_reproduction_tests([REPRODUCE, ALWAYS_RESOLVED, "no code", HANGS])
        assert [t.status for t in tests] == ["kept", "not_reproducing", "unparseable", "failed_to_run"]
        assert "Issue reproduced" in tests[0].output

        golden = instance["patch"]
        gold_tests = instance["FAIL_TO_PASS"] + instance["PASS_TO_PASS"]
        results = validator.validate(
            [golden, BREAKS_REGRESSION, golden, DOES_NOT_APPLY, ""],
            regression,
            [tests[0].code],
            test_patch=instance["test_patch"],
            gold_tests=gold_tests,
        )
        assert list(results) == [golden, BREAKS_REGRESSION, DOES_NOT_APPLY]  # duplicates run once
        good, bad, broken = results.values()
        assert good.regression_ok and good.reproduction_resolved == [True] and good.resolved
        assert good.pass_rate == 1.0
        assert bad.regression_failed == ["tests/test_words.py::test_word_count_simple"]
        assert not bad.regression_ok and bad.resolved is False
        assert bad.pass_rate == pytest.approx(6 / 8)  # 6 of 7 regression tests, reproduction not resolved
        assert broken.error and "does not apply" in broken.error and broken.resolved is False
        scratch = validator.scratch
    pool.close()
    assert not scratch.exists()
    assert git_state(path) == before
