"""The SWE repair and judge prompts of the seed's appendix C.2 (SPEC appendix), in the wording of
the Agentless prompts they come from: the repair prompt asks for SEARCH/REPLACE edits in the
format :mod:`cascade_rl.rewards.swe_edits` reads, and the judge prompt is the SWE reward's
semantic similarity (:mod:`cascade_rl.rewards.swe`). They live beside the reward that reads
their answers, below the SWE pipeline and the toy world that write them (DESIGN.md, "Layers");
the pipeline's localisation and reproduction-test prompts are :mod:`cascade_rl.swe.prompts`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def repair_prompt(problem_statement: str, content: str) -> str:
    return REPAIR_PROMPT.format(problem_statement=problem_statement, content=content)


def repair_messages(problem_statement: str, content: str) -> list[dict]:
    return [{"role": "user", "content": repair_prompt(problem_statement, content)}]


def judge_messages(repair_prompt_text: str, golden_patch: str, model_patch: str) -> list[dict]:
    """The reward judge's conversation: its system prompt, then the repair prompt the policy
    saw followed by the golden and the model's patches (appendix C.2)."""
    user = repair_prompt_text.rstrip() + JUDGE_USER_SUFFIX.format(golden_patch=golden_patch, model_patch=model_patch)
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]
