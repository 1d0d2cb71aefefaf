"""The pipeline's own SWE prompts of the seed's appendix C.2 (SPEC appendix), in the wording of
the Agentless prompts they come from: localisation and reproduction-test generation. Each
``*_messages`` function returns chat messages ready for a generator.

The repair and judge prompts are defined beside the reward that reads their answers, in
:mod:`cascade_rl.rewards.swe_prompts` (below this package: DESIGN.md, "Layers").
"""

from __future__ import annotations

LOCALIZATION_PROMPT = """\
Please look through the following GitHub problem description and Repository structure and \
provide a list of files that one would need to edit or look at to solve the issue.

### GitHub Problem Description ###
{problem_statement}

###

### Repository Structure ###
{structure}

###

Please only provide the full path and return at most {n} files.
The returned files should be separated by new lines ordered by most to least important and \
wrapped with ```
For example:
```
most/important/file1.xx
less/important/file2.yy
least/important/file3.zz
```"""

REPRODUCTION_TEST_PROMPT = """\
We are currently solving the following issue within our repository. Here is the issue text:
--- BEGIN ISSUE ---
{problem_statement}
--- END ISSUE ---

Several candidate fix patches have been generated for this issue. Inspect them carefully and \
choose the one that best matches the issue description when creating the test, so that it \
specifically verifies the behaviour before and after the patch:
--- BEGIN PATCH ---
{model_patch}
--- END PATCH ---

Below are some code segments, each from a relevant file. One or more of these files may \
contain bugs.
--- BEGIN FILE ---
```
{content}
```
--- END FILE ---

Please generate a complete test that can be used to reproduce the issue.

The complete test should contain the following:
1. Necessary imports
2. Code to reproduce the issue described in the issue text, before the patch
3. Tests of the exact function, class or lines changed by the patch
4. Assertions or checks confirming the issue reproduces without the patch
5. Assertions or checks confirming the issue is resolved with the patch
6. Meaningful assertions tied to the patch's change (expected output, raised exception, \
changed return value)
7. Print "Issue reproduced" if the outcome indicates that the issue is reproduced
8. Print "Issue resolved" if the outcome indicates that the issue has been successfully resolved
9. Print "Other issues" if the outcome indicates there are other issues with the source code

The test must not be generic; it must directly verify the patch.
Here is an example:

```python
from sqlfluff import lint

def test__rules__std_L060_raised() -> None:
    try:
        sql = "SELECT   IFNULL(NULL, 100),   NVL(NULL,100);"
        result = lint(sql, rules=["L060"])
        assert len(result) == 2
    except:
        print("Other issues")
        return

    try:
        assert result[0]["description"] == "Use 'COALESCE' instead of 'IFNULL'."
        assert result[1]["description"] == "Use 'COALESCE' instead of 'NVL'."
        print("Issue resolved")
    except AssertionError:
        print("Issue reproduced")
        return

    return

test__rules__std_L060_raised()
```

Please ensure the generated test reflects the issue described in the provided issue text.
The generated test should be able to be used to both reproduce the issue as well as to verify \
the issue has been fixed.
Wrap the complete test in ```python...```."""


def localization_messages(problem_statement: str, structure: str, n: int = 5) -> list[dict]:
    return [
        {
            "role": "user",
            "content": LOCALIZATION_PROMPT.format(problem_statement=problem_statement, structure=structure, n=n),
        }
    ]


def reproduction_test_messages(problem_statement: str, model_patch: str, content: str) -> list[dict]:
    return [
        {
            "role": "user",
            "content": REPRODUCTION_TEST_PROMPT.format(
                problem_statement=problem_statement, model_patch=model_patch, content=content
            ),
        }
    ]
