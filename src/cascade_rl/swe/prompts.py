"""The SWE prompts of the seed's appendix C.2 (SPEC appendix), in the wording of the
Agentless prompts they come from: localisation, repair, reproduction-test generation and the
reward judge. Each ``*_messages`` function returns chat messages ready for a generator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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

_EDIT_FORMAT = """\
Please first localize the bug based on the issue statement, and then generate *SEARCH/REPLACE* \
edits to fix the issue.

Every *SEARCH/REPLACE* edit must use this format:
1. The start of the diff block: ```diff
2. The file path
3. The start of search block: <<<<<<< SEARCH
4. A contiguous chunk of lines to search for in the existing source code
5. The dividing line: =======
6. The lines to replace into the source code
7. The end of the replace block: >>>>>>> REPLACE
8. The end of the diff block: ```

Here is an example:

```diff
### mathweb/flask/app.py
<<<<<<< SEARCH
from flask import Flask
=======
import math
from flask import Flask
>>>>>>> REPLACE
```

Please note that the *SEARCH/REPLACE* edit REQUIRES PROPER INDENTATION. If you would like to \
add the line '        print(x)', you must fully write that out, with all those spaces before \
the code!
Wrap each *SEARCH/REPLACE* edit in a code block as shown in the example above. If you have \
multiple *SEARCH/REPLACE* edits, use a separate code block for each one."""

_ISSUE_AND_FILES = """\
We are currently solving the following issue within our repository. Here is the issue text:
--- BEGIN ISSUE ---
{problem_statement}
--- END ISSUE ---

Below are some code segments, each from a relevant file. One or more of these files may \
contain bugs.

--- BEGIN FILE ---
```
{content}
```
--- END FILE ---"""

REPAIR_PROMPT = (
    _ISSUE_AND_FILES
    + "\n\n"
    + _EDIT_FORMAT
    + """
Output format requirement: put your reasoning tokens in a separate block starting with <think> \
and ending with </think>, and your solution in a separate block starting with <solution> and \
ending with </solution>."""
)

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

JUDGE_SYSTEM_PROMPT = """\
You are an expert judge evaluating AI assistant interactions. Your task is to determine if the \
assistant successfully resolved the user's request, given a reference golden solution.

Key evaluation criteria:
1. Did the assistant complete the main task requested by the user?
2. Are there any errors or issues in the final solution?

Respond only with "<judgement>YES</judgement>" or "<judgement>NO</judgement>"."""

JUDGE_USER_SUFFIX = """

Here is the reference golden git diff solution:
{golden_patch}

Here is the assistant's solution:
{model_patch}

Please compare the assistant's solution with the reference golden git diff solution and \
determine whether the assistant's solution successfully resolves the issue. Note that the \
solution does not need to be identical to the reference. Use your own knowledge to judge \
whether the assistant's solution resolves the issue. Respond with \
"<judgement>YES</judgement>" or "<judgement>NO</judgement>"."""


def format_files(files: Mapping[str, str] | Iterable[tuple[str, str]]) -> str:
    """Files as the ``{content}`` of the repair prompt: ``### path`` then the text, in order."""
    items = files.items() if isinstance(files, Mapping) else files
    return "\n".join(f"### {path}\n{text.rstrip()}\n" for path, text in items)


def localization_messages(problem_statement: str, structure: str, n: int = 5) -> list[dict]:
    return [
        {
            "role": "user",
            "content": LOCALIZATION_PROMPT.format(problem_statement=problem_statement, structure=structure, n=n),
        }
    ]


def repair_prompt(problem_statement: str, content: str) -> str:
    return REPAIR_PROMPT.format(problem_statement=problem_statement, content=content)


def repair_messages(problem_statement: str, content: str) -> list[dict]:
    return [{"role": "user", "content": repair_prompt(problem_statement, content)}]


def reproduction_test_messages(problem_statement: str, model_patch: str, content: str) -> list[dict]:
    return [
        {
            "role": "user",
            "content": REPRODUCTION_TEST_PROMPT.format(
                problem_statement=problem_statement, model_patch=model_patch, content=content
            ),
        }
    ]


def judge_messages(repair_prompt_text: str, golden_patch: str, model_patch: str) -> list[dict]:
    """The reward judge's conversation: its system prompt, then the repair prompt the policy
    saw followed by the golden and the model's patches (appendix C.2)."""
    user = repair_prompt_text.rstrip() + JUDGE_USER_SUFFIX.format(golden_patch=golden_patch, model_patch=model_patch)
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]
