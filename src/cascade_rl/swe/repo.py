"""Read-only access to a repository at one commit, and throw-away copies of it (SPEC section 7).

Everything is read from git objects (``git ls-tree``, ``git cat-file --batch``, ``git archive``),
never from the working tree, so the user's checkout -- its files, index, branches and worktree
list -- is never touched, whatever its current state. Every git call has a timeout.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

GIT_TIMEOUT = 120.0


class RepositoryError(ValueError):
    """A checkout or commit that cannot be used (not a git repository, unknown commit, ...)."""


def _git(path: Path, *args: str, stdin: bytes | None = None, timeout: float = GIT_TIMEOUT) -> bytes:
    command = ["git", "-c", f"safe.directory={path}", "-C", str(path), *args]
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RepositoryError(f"{path}: `git {' '.join(args)}` took more than {timeout:.0f} s") from None
    except FileNotFoundError:
        raise RepositoryError("the git command is not installed") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise RepositoryError(
            f"{path}: `git {' '.join(args[:2])}` failed: {message[-1] if message else done.returncode}"
        )
    return done.stdout


@dataclass
class Repository:
    """A git checkout at a fixed commit. Build with :meth:`open`."""

    path: Path
    commit: str
    _files: list[str] | None = field(default=None, repr=False)

    @classmethod
    def open(cls, path: str | Path, commit: str) -> Repository:
        """Check that ``path`` is a git checkout holding ``commit`` (any revision git
        understands; stored resolved to its full hash)."""
        path = Path(path).expanduser().resolve()
        if not path.is_dir():
            raise RepositoryError(f"checkout {path} does not exist")
        if not commit or not isinstance(commit, str):
            raise RepositoryError(f"{path}: no commit given")
        try:
            _git(path, "rev-parse", "--git-dir")
        except RepositoryError:
            raise RepositoryError(f"{path} is not a git checkout") from None
        try:
            full = _git(path, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").decode().strip()
        except RepositoryError:
            raise RepositoryError(f"{path}: unknown commit {commit!r}") from None
        return cls(path, full)

    def files(self) -> list[str]:
        """Every file path at the commit, sorted."""
        if self._files is None:
            listing = _git(self.path, "ls-tree", "-r", "-z", "--name-only", self.commit)
            self._files = sorted(name for name in listing.decode(errors="replace").split("\0") if name)
        return list(self._files)

    def source_files(self, suffixes: Sequence[str] = (".py",)) -> list[str]:
        """Paths at the commit ending with one of ``suffixes``."""
        return [path for path in self.files() if path.endswith(tuple(suffixes))]

    def read(self, paths: Iterable[str]) -> dict[str, str]:
        """Contents at the commit of those ``paths`` that exist (UTF-8, undecodable bytes
        replaced); unknown paths are left out. One ``git cat-file --batch`` call."""
        known = set(self.files())
        wanted = [path for path in dict.fromkeys(paths) if path in known]
        if not wanted:
            return {}
        request = "".join(f"{self.commit}:{path}\n" for path in wanted).encode()
        stream = io.BytesIO(_git(self.path, "cat-file", "--batch", stdin=request))
        contents = {}
        for path in wanted:
            header = stream.readline().decode().split()
            if len(header) < 3 or header[1] != "blob":
                continue  # a submodule or a missing object
            contents[path] = stream.read(int(header[2])).decode(errors="replace")
            stream.readline()
        return contents

    def structure(self, suffixes: Sequence[str] = (".py",)) -> str:
        """The repository tree as indented text (the ``{structure}`` of the localisation
        prompt): directories end with ``/``; only files with ``suffixes`` are listed."""
        return tree_text(self.source_files(suffixes))

    def export(self, destination: Path) -> Path:
        """Write the tree at the commit into ``destination`` (created; must be empty) with
        ``git archive``; returns ``destination``."""
        destination.mkdir(parents=True, exist_ok=True)
        if any(destination.iterdir()):
            raise RepositoryError(f"export destination {destination} is not empty")
        archive = _git(self.path, "archive", "--format=tar", self.commit)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(destination, filter="data")
        return destination


def tree_text(paths: Iterable[str]) -> str:
    """Sorted file ``paths`` as an indented tree: one line per directory (ending with ``/``) and
    per file, four spaces per level."""
    lines: list[str] = []
    shown: set[tuple[str, ...]] = set()
    for path in sorted(paths):
        parts = path.split("/")
        for depth in range(len(parts) - 1):
            if tuple(parts[: depth + 1]) not in shown:
                shown.add(tuple(parts[: depth + 1]))
                lines.append("    " * depth + parts[depth] + "/")
        lines.append("    " * (len(parts) - 1) + parts[-1])
    return "\n".join(lines)


def apply_patch_to_tree(tree: Path, patch: str, *, timeout: float = 60.0) -> None:
    """Apply a unified diff to a plain directory with ``git apply`` (no repository needed);
    raises :class:`RepositoryError` with git's message when it does not apply."""
    if not patch.strip():
        return
    with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False) as handle:
        handle.write(patch if patch.endswith("\n") else patch + "\n")
    try:
        command = ["git", "apply", "--whitespace=nowarn", handle.name]
        # no repository discovery above the tree: git would apply paths relative to it
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(Path(tree).resolve().parent)}
        done = subprocess.run(command, cwd=tree, capture_output=True, timeout=timeout, check=False, env=env)
    except subprocess.TimeoutExpired:
        raise RepositoryError(f"git apply took more than {timeout:.0f} s") from None
    finally:
        Path(handle.name).unlink(missing_ok=True)
    if done.returncode != 0:
        raise RepositoryError(f"patch does not apply: {done.stderr.decode(errors='replace').strip()}")


def copy_tree(source: Path, destination: Path) -> Path:
    """A full copy of ``source`` at ``destination`` (symlinks kept as links)."""
    shutil.copytree(source, destination, symlinks=True)
    return destination
