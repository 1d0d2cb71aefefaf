"""SEARCH/REPLACE parsing, application and diff rendering (rewards/swe_edits.py)."""

import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_rl.rewards.swe_edits import (
    EditApplyError,
    EditParseError,
    PatchApplyError,
    SearchReplace,
    apply_edits,
    apply_patch,
    edits_to_patch,
    parse_edits,
    unified_diff,
)

FILES = {
    "pkg/calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "pkg/util.py": "VALUE = 1\nOTHER = 2\n",
}


def block(path, search, replace, fence=True):
    body = f"### {path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"
    return f"```diff\n{body}```\n" if fence else body


@pytest.mark.parametrize(
    "text, expected",
    [
        (block("a.py", "x = 1\n", "x = 2\n"), [SearchReplace("a.py", "x = 1\n", "x = 2\n")]),
        (block("a.py", "x = 1\n", "x = 2\n", fence=False), [SearchReplace("a.py", "x = 1\n", "x = 2\n")]),
        # <solution> wrapper, with text outside that must be ignored
        (
            "I will fix it.\n"
            + block("junk.py", "a\n", "b\n")
            + "<solution>\n"
            + block("a.py", "x\n", "y\n")
            + "</solution>",
            [SearchReplace("a.py", "x\n", "y\n")],
        ),
        # several edits under one header, then another file
        (
            "```diff\n### a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nz\n"
            "=======\nw\n>>>>>>> REPLACE\n```\n" + block("b/c.py", "1\n", "2\n"),
            [
                SearchReplace("a.py", "x\n", "y\n"),
                SearchReplace("a.py", "z\n", "w\n"),
                SearchReplace("b/c.py", "1\n", "2\n"),
            ],
        ),
        # the seed's marker variants and ###### header
        (
            "```diff\n###### mathweb/flask/app.py\n<<<< SEARCH\nfrom flask import Flask\n======\n"
            "import math\nfrom flask import Flask\n>>>>>>>> REPLACE\n```",
            [
                SearchReplace(
                    "mathweb/flask/app.py", "from flask import Flask\n", "import math\nfrom flask import Flask\n"
                )
            ],
        ),
        # bare path line (aider style), empty SEARCH, empty REPLACE
        (
            "new/mod.py\n```python\n<<<<<<< SEARCH\n=======\nprint(1)\n>>>>>>> REPLACE\n```\n"
            "```diff\n### a.py\n<<<<<<< SEARCH\ndel_me\n=======\n>>>>>>> REPLACE\n```",
            [SearchReplace("new/mod.py", "", "print(1)\n"), SearchReplace("a.py", "del_me\n", "")],
        ),
        # a bare path line right before a fence wins over an earlier header
        (
            block("a.py", "x\n", "y\n") + "b.py\n" + "```diff\n<<<<<<< SEARCH\nz\n=======\nw\n>>>>>>> REPLACE\n```",
            [SearchReplace("a.py", "x\n", "y\n"), SearchReplace("b.py", "z\n", "w\n")],
        ),
        # a "### " header inside a SEARCH block is code, not a new path
        (
            "```diff\n### a.py\n<<<<<<< SEARCH\n### not/a/path.md\n=======\n## title\n>>>>>>> REPLACE\n```",
            [SearchReplace("a.py", "### not/a/path.md\n", "## title\n")],
        ),
    ],
)
def test_parse_edits(text, expected):
    assert parse_edits(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("no edits at all", "no SEARCH/REPLACE edit"),
        ("```diff\n### a.py\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n```", "divider"),
        ("```diff\n### a.py\n<<<<<<< SEARCH\nx\n=======\ny\n```", "REPLACE"),
        (
            "```diff\n### a.py\n<<<<<<< SEARCH\nx\n=======\ny\n```\n" + block("a.py", "z\n", "w\n"),
            "an edit without its end",
        ),
        ("```diff\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```", "without a file path"),
        ("<solution>just words</solution>" + block("a.py", "x\n", "y\n"), "no SEARCH/REPLACE edit"),
    ],
)
def test_parse_errors_name_the_problem(text, message):
    with pytest.raises(EditParseError, match=message):
        parse_edits(text)


def test_apply_multi_file_and_accumulate_edits_in_one_file():
    edits = [
        SearchReplace("pkg/calc.py", "    return a - b\n", "    return a + b\n"),
        SearchReplace("pkg/calc.py", "    return a + b\n", "    return b + a\n"),
        SearchReplace("pkg/util.py", "OTHER = 2\n", "OTHER = 3\n"),
    ]
    edited = apply_edits(FILES, edits)
    assert edited["pkg/calc.py"].startswith("def add(a, b):\n    return b + a\n")
    assert edited["pkg/util.py"] == "VALUE = 1\nOTHER = 3\n"
    assert FILES["pkg/calc.py"].count("a - b") == 1  # originals untouched


def test_repeated_search_text_first_occurrence_or_rejected():
    files = {"a.py": "x = 0\nx = 0\n"}
    edit = [SearchReplace("a.py", "x = 0\n", "x = 1\n")]
    assert apply_edits(files, edit) == {"a.py": "x = 1\nx = 0\n"}
    with pytest.raises(EditApplyError, match="occurs 2 times"):
        apply_edits(files, edit, ambiguous="reject")


def test_trailing_whitespace_fallback_but_indentation_matters():
    files = {"a.py": "def f():   \n    return 1\t\n\nprint(f())"}
    edited = apply_edits(files, [SearchReplace("a.py", "def f():\n    return 1\n", "def f():\n    return 2\n")])
    assert edited["a.py"] == "def f():\n    return 2\n\nprint(f())"
    # the last line has no newline in the file: still found, and the file still ends without one
    edited = apply_edits(files, [SearchReplace("a.py", "print(f())\n", "print(f() + 1)\n")])
    assert edited["a.py"].endswith("\nprint(f() + 1)")
    with pytest.raises(EditApplyError, match="not found"):
        apply_edits(files, [SearchReplace("a.py", "return 1\n", "return 2\n")])  # lost indentation


def test_new_files_missing_files_and_append():
    created = apply_edits({}, [SearchReplace("docs/new.py", "", "A = 1\n")])
    assert created == {"docs/new.py": "A = 1\n"}
    with pytest.raises(EditApplyError, match="edit 1 \\(nope.py\\): file not found"):
        apply_edits({}, [SearchReplace("nope.py", "x\n", "y\n")])
    appended = apply_edits({"a.py": "x = 1"}, [SearchReplace("a.py", "", "y = 2\n")])
    assert appended == {"a.py": "x = 1\ny = 2\n"}


def _git_apply(tmp_path: Path, files: dict, patch: str) -> dict:
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "change.diff").write_text(patch)
    subprocess.run(["git", "apply", "change.diff"], cwd=tmp_path, check=True, timeout=30)
    return {p.relative_to(tmp_path).as_posix(): p.read_text() for p in tmp_path.rglob("*.py")}


def test_patch_is_git_style_and_git_applies_it(tmp_path):
    answer = (
        "<think>the sign is wrong</think>\n<solution>\n"
        + block("pkg/calc.py", "    return a - b\n", "    return a + b\n")
        + block("pkg/new.py", "", "NEW = True\n")
        + "</solution>"
    )
    result = edits_to_patch(answer, FILES)
    assert result.patch.startswith(
        "diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ -1,5 +1,5 @@\n"
    )
    assert (
        "diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/new.py\n" in result.patch
    )
    assert "-    return a - b\n+    return a + b\n" in result.patch
    # exactly 3 context lines after the change
    assert result.patch.split("+    return a + b\n")[1].startswith(" \n \n def mul(a, b):\ndiff --git")
    applied = _git_apply(tmp_path, FILES, result.patch)
    assert applied["pkg/calc.py"] == result.edited_files["pkg/calc.py"]
    assert applied["pkg/new.py"] == "NEW = True\n"


def test_no_newline_at_end_of_file_round_trips(tmp_path):
    files = {"a.py": "x = 1\ny = 2"}
    patch = unified_diff(files, {"a.py": "x = 1\ny = 3"})
    assert patch.endswith("+y = 3\n\\ No newline at end of file\n")
    assert apply_patch(files, patch) == {"a.py": "x = 1\ny = 3"}
    assert _git_apply(tmp_path, files, patch)["a.py"] == "x = 1\ny = 3"


def test_unchanged_files_give_an_empty_patch():
    result = edits_to_patch(block("pkg/util.py", "VALUE = 1\n", "VALUE = 1\n"), FILES)
    assert result.patch == ""


def test_apply_patch_checks_context_and_files():
    patch = unified_diff(FILES, {"pkg/util.py": "VALUE = 10\nOTHER = 2\n"})
    assert apply_patch(FILES, patch) == {"pkg/util.py": "VALUE = 10\nOTHER = 2\n"}
    with pytest.raises(PatchApplyError, match="does not match at line 1"):
        apply_patch({"pkg/util.py": "something else\n"}, patch)
    with pytest.raises(PatchApplyError, match="not among the given files"):
        apply_patch({}, patch)


_marker_lines = st.sampled_from(
    [
        "<<<<<<< SEARCH",
        "=======",
        ">>>>>>> REPLACE",
        "```diff",
        "```",
        "### a.py",
        "<solution>",
        "</solution>",
        "x = 1",
        "",
        "    y",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_marker_lines, st.text(max_size=40)), max_size=30))
def test_fuzzed_answers_only_raise_edit_errors_and_are_fast(lines):
    start = time.perf_counter()
    try:
        edits_to_patch("\n".join(lines), {"a.py": "x = 1\n    y\n"})
    except (EditParseError, EditApplyError):
        pass
    assert time.perf_counter() - start < 1.0
