"""File-level localisation (SPEC section 7.1): generation, retrieval, fusion, recall@k.

(a) **Generation**: the model reads the issue and the repository tree (appendix C.2
    localisation prompt) and lists likely files; ``rollouts`` samples are aggregated by
    frequency (a file named by more samples ranks higher; ties go to the better mean position
    in the samples that named it, then to the first seen), keeping only paths that exist.
(b) **Retrieval**: BM25 over file contents (``bm25s``) by default -- the index is built once
    per repository commit (:class:`IndexCache`) and reused for every query -- or, when a local
    sentence-embedding model path is given, cosine similarity of mean-pooled
    ``transformers.AutoModel`` embeddings (files split into windows, a file scores its best
    window). The paper uses the NV-Embed-Code model; any local encoder works.
(c) **Fusion**: reciprocal-rank fusion, score(f) = sum over rankings of 1 / (k + rank(f)),
    with k = 0 as in the paper (ranks from 1).

Test files are left out of all three, as Agentless does (its ``filter_out_test_files``): a
path with a folder or file name starting with ``test`` is neither shown in the repository
structure, nor kept from a generated list, nor indexed for retrieval. On real repositories
the tests repeat the issue's words and would crowd the gold file out of the top ranks;
``include_tests=True`` keeps them.

recall@k is 1 for an instance iff all gold files are in the top k (seed section 7.1).
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cascade_rl.chat import split_thinking
from cascade_rl.llm.base import Sampling
from cascade_rl.llm.pretrained import load_pretrained
from cascade_rl.swe.prompts import localization_messages
from cascade_rl.swe.repo import tree_text

if TYPE_CHECKING:
    from cascade_rl.llm.base import Generator
    from cascade_rl.swe.repo import Repository

RECALL_KS = (1, 3, 5, 10)
_FENCE_RE = re.compile(r"```[^\n]*\n(.*?)(?:```|$)", re.S)
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have if in into is it its no not of on or "
    "such that the their then there these they this to was will with self def return none "
    "true false import".split()
)


class Retriever(Protocol):
    def rank(self, query: str, k: int | None = None) -> list[str]: ...


def is_test_path(path: str) -> bool:
    """Agentless's rule: a folder or file name of the path starts with ``test``."""
    return any(part.startswith("test") for part in path.split("/"))


def localizable_files(repo: Repository, suffixes: Sequence[str] = (".py",), include_tests: bool = False) -> list[str]:
    """The files localisation may name: source files with ``suffixes``, test files left out
    unless ``include_tests``."""
    return [path for path in repo.source_files(suffixes) if include_tests or not is_test_path(path)]


# ---- (a) generation -----------------------------------------------------------------------


def parse_file_list(response: str) -> list[str]:
    """The paths a localisation answer lists: the lines of its last fenced block (all lines
    when it has none), stripped, without duplicates, in order. Thinking is skipped; an
    unfinished response lists nothing."""
    split = split_thinking(response)
    if not split.finished:
        return []
    blocks = _FENCE_RE.findall(split.answer)
    text = blocks[-1] if blocks else split.answer
    paths = (line.strip().strip("`").strip() for line in text.splitlines())
    return list(dict.fromkeys(path.removeprefix("./") for path in paths if path and " " not in path))


def aggregate_by_frequency(lists: Sequence[Sequence[str]], existing: Iterable[str]) -> list[str]:
    """Rank the paths named in ``lists`` (one list per rollout) by how many rollouts name them;
    ties by mean position, then first appearance. Paths not in ``existing`` are dropped."""
    known = set(existing)
    counts: Counter[str] = Counter()
    positions: dict[str, list[int]] = {}
    first_seen: dict[str, int] = {}
    for rollout in lists:
        kept = [path for path in dict.fromkeys(rollout) if path in known]
        for position, path in enumerate(kept):
            counts[path] += 1
            positions.setdefault(path, []).append(position)
            first_seen.setdefault(path, len(first_seen))
    return sorted(counts, key=lambda p: (-counts[p], sum(positions[p]) / len(positions[p]), first_seen[p]))


@dataclass
class GeneratedLocalization:
    ranking: list[str]
    responses: list[str]
    parsed: list[list[str]]
    prompt: list[dict]


def localize_by_generation(
    generator: Generator,
    problem_statement: str,
    repo: Repository,
    *,
    rollouts: int = 4,
    top_n: int = 5,
    sampling: Sampling = Sampling(),
    include_tests: bool = False,
) -> GeneratedLocalization:
    """Ask ``generator`` (``cascade_rl.llm.base.Generator``) for ``rollouts`` file lists, sampled
    from ``sampling``'s distribution, and aggregate them by frequency. The model sees the source
    tree without test files (unless ``include_tests``); a named test file is dropped like a path
    that does not exist."""
    shown = localizable_files(repo, include_tests=include_tests)
    messages = localization_messages(problem_statement, tree_text(shown), top_n)
    responses = generator.generate(messages, sampling.times(rollouts))
    parsed = [parse_file_list(response) for response in responses]
    existing = [path for path in repo.files() if include_tests or not is_test_path(path)]
    return GeneratedLocalization(aggregate_by_frequency(parsed, existing), list(responses), parsed, messages)


# ---- (b) retrieval ------------------------------------------------------------------------


def code_tokens(text: str) -> list[str]:
    """Lower-cased identifiers and their snake_case / camelCase parts, without stopwords:
    ``parseHttpHeader`` -> ``parsehttpheader parse http header``."""
    tokens = []
    for word in _IDENTIFIER_RE.findall(text):
        parts = [part.lower() for piece in word.split("_") for part in _CAMEL_RE.findall(piece)]
        tokens.extend(
            token for token in dict.fromkeys([word.lower(), *parts]) if len(token) > 1 and token not in _STOPWORDS
        )
    return tokens


class BM25Retriever:
    """BM25 (``bm25s``) over the given files, each indexed as its path plus its content. The
    index is built once, in the constructor; :meth:`rank` only scores."""

    def __init__(self, files: Mapping[str, str]):
        import bm25s

        if not files:
            raise ValueError("BM25Retriever needs at least one file to index")
        self.paths = sorted(files)
        self._index = bm25s.BM25()
        self._index.index(
            [code_tokens(f"{path}\n{files[path]}") or ["<empty>"] for path in self.paths], show_progress=False
        )
        self._vocabulary = set(self._index.vocab_dict)

    def scores(self, query: str) -> dict[str, float]:
        tokens = [token for token in code_tokens(query) if token in self._vocabulary]
        if not tokens:
            return dict.fromkeys(self.paths, 0.0)
        return dict(zip(self.paths, (float(s) for s in self._index.get_scores(tokens))))

    def rank(self, query: str, k: int | None = None) -> list[str]:
        """The indexed paths, best first (ties in path order); the top ``k`` when given."""
        return _top(self.scores(query), k)


def _top(scores: Mapping[str, float], k: int | None) -> list[str]:
    ranking = sorted(scores, key=lambda path: -scores[path])  # stable: ties keep path order
    return ranking if k is None else ranking[:k]


class EmbeddingRetriever:
    """Cosine similarity between the query and file embeddings from a local encoder
    (``AutoModel``, mean pooling over the attention mask, L2-normalised). Each file is split
    into windows of ``max_length`` tokens and scores its best window. Files are embedded once,
    in the constructor."""

    def __init__(
        self,
        model_path: str,
        files: Mapping[str, str],
        *,
        max_length: int = 512,
        batch_size: int = 16,
        device: str = "cpu",
    ):
        import torch
        from transformers import AutoModel, AutoTokenizer

        if not files:
            raise ValueError("EmbeddingRetriever needs at least one file to embed")
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = load_pretrained(AutoModel, model_path).to(device).eval()
        self.device, self.max_length, self.batch_size = device, max_length, batch_size
        self.paths = sorted(files)
        windows, owners = [], []
        for index, path in enumerate(self.paths):
            for window in self._windows(f"{path}\n{files[path]}"):
                windows.append(window)
                owners.append(index)
        self._owners = torch.tensor(owners)
        self._window_vectors = self.embed(windows)

    def _windows(self, text: str) -> list[str]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        size = max(self.max_length - 2, 1)
        return [self.tokenizer.decode(ids[start : start + size]) for start in range(0, max(len(ids), 1), size)]

    def embed(self, texts: Sequence[str]):
        """L2-normalised mean-pooled embeddings of ``texts`` (one row each)."""
        torch = self._torch
        rows = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(
                    list(texts[start : start + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
                rows.append(torch.nn.functional.normalize(pooled, dim=-1).cpu())
        return torch.cat(rows)

    def scores(self, query: str) -> dict[str, float]:
        torch = self._torch
        similarity = self._window_vectors @ self.embed([query])[0]
        best = torch.full((len(self.paths),), -2.0).scatter_reduce(0, self._owners, similarity, "amax")
        return dict(zip(self.paths, best.tolist()))

    def rank(self, query: str, k: int | None = None) -> list[str]:
        return _top(self.scores(query), k)


class IndexCache:
    """Retrievers built once per (repository, commit, retriever kind) and reused across
    queries and instances; least recently used ones are dropped beyond ``size``."""

    def __init__(self, size: int = 4):
        self.size = size
        self._cache: OrderedDict[tuple, Retriever] = OrderedDict()
        self.builds = 0

    def get(
        self,
        repo: Repository,
        *,
        embedding_model: str | None = None,
        suffixes: Sequence[str] = (".py",),
        include_tests: bool = False,
    ) -> Retriever:
        key = (str(repo.path), repo.commit, embedding_model, tuple(suffixes), include_tests)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        files = repo.read(localizable_files(repo, suffixes, include_tests))
        if not files:
            raise ValueError(f"{repo.path}: no {'/'.join(suffixes)} files at {repo.commit[:12]} to index")
        retriever: Retriever = EmbeddingRetriever(embedding_model, files) if embedding_model else BM25Retriever(files)
        self.builds += 1
        self._cache[key] = retriever
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return retriever


# ---- (c) fusion and metrics ---------------------------------------------------------------


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: float = 0.0) -> list[str]:
    """Fuse rankings: score(f) = sum of 1 / (k + rank) over the rankings that hold f (ranks
    start at 1). Ties go to the better best rank, then to the earlier ranking's order."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    for ranking in rankings:
        for rank, path in enumerate(dict.fromkeys(ranking), 1):
            scores[path] = scores.get(path, 0.0) + 1.0 / (k + rank)
            best_rank[path] = min(best_rank.get(path, rank), rank)
    order = {path: i for i, path in enumerate(scores)}
    return sorted(scores, key=lambda p: (-scores[p], best_rank[p], order[p]))


def recall_at_k(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 iff every gold file is among the top ``k`` of ``ranking`` (0.0 with no gold file)."""
    gold = set(gold)
    return float(bool(gold) and gold <= set(ranking[:k]))


def recall_table(
    results: Sequence[tuple[Sequence[str], Iterable[str]]], ks: Sequence[int] = RECALL_KS
) -> dict[int, float]:
    """Mean recall@k over (ranking, gold files) pairs, for each k."""
    if not results:
        return {k: 0.0 for k in ks}
    pairs = [(ranking, set(gold)) for ranking, gold in results]
    return {k: sum(recall_at_k(r, g, k) for r, g in pairs) / len(pairs) for k in ks}


@dataclass
class Localization:
    """The three rankings of one instance (each best first), with the raw generation output."""

    generated: list[str] = field(default_factory=list)
    retrieved: list[str] = field(default_factory=list)
    fused: list[str] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)
    parsed: list[list[str]] = field(default_factory=list)
    prompt: list[dict] = field(default_factory=list)

    def rankings(self) -> dict[str, list[str]]:
        return {"generation": self.generated, "retrieval": self.retrieved, "fusion": self.fused}


def localize(
    problem_statement: str,
    repo: Repository,
    *,
    generator: Generator | None = None,
    cache: IndexCache | None = None,
    embedding_model: str | None = None,
    rollouts: int = 4,
    top_n: int = 5,
    retrieve_k: int = 50,
    rrf_k: float = 0.0,
    sampling: Sampling = Sampling(),
    include_tests: bool = False,
) -> Localization:
    """Localise files for one issue: generation (when a generator is given), retrieval, fusion.

    ``sampling`` is the generator's distribution (its ``n`` is ``rollouts``); test
    files take part only with ``include_tests`` (module docstring).
    """
    result = Localization()
    if generator is not None:
        generated = localize_by_generation(
            generator,
            problem_statement,
            repo,
            rollouts=rollouts,
            top_n=top_n,
            sampling=sampling,
            include_tests=include_tests,
        )
        result.generated, result.responses, result.parsed, result.prompt = (
            generated.ranking,
            generated.responses,
            generated.parsed,
            generated.prompt,
        )
    retriever = (cache or IndexCache()).get(repo, embedding_model=embedding_model, include_tests=include_tests)
    result.retrieved = retriever.rank(problem_statement, retrieve_k)
    rankings = [ranking for ranking in (result.generated, result.retrieved) if ranking]
    result.fused = reciprocal_rank_fusion(rankings, rrf_k)
    return result
