"""File localisation: generation + frequency vote, BM25 and embedding retrieval, RRF, recall."""

import time

import pytest
from swe_assets import ScriptedGenerator

from cascade_rl.rewards.swe_edits import parse_patch, patched_path
from cascade_rl.swe.localize import (
    BM25Retriever,
    EmbeddingRetriever,
    IndexCache,
    aggregate_by_frequency,
    code_tokens,
    localize,
    parse_file_list,
    recall_at_k,
    recall_table,
    reciprocal_rank_fusion,
)
from cascade_rl.swe.repo import Repository, RepositoryError


def gold_files(instance):
    return {patched_path(f) for f in parse_patch(instance["patch"])}


@pytest.mark.parametrize(
    "response, expected",
    [
        ("<think>hmm</think>\n```\nsrc/a.py\n./src/b.py\nsrc/a.py\n```", ["src/a.py", "src/b.py"]),
        ("```\nold.py\n```\nOn second thought:\n```text\nnew.py\n```", ["new.py"]),
        ("src/a.py\nThis is the file.\n", ["src/a.py"]),
        ("<think>src/a.py never closed", []),
    ],
)
def test_parse_file_list(response, expected):
    assert parse_file_list(response) == expected


def test_frequency_vote_keeps_existing_paths_only():
    lists = [["b.py", "ghost.py", "a.py"], ["a.py", "b.py"], ["a.py"], ["c.py", "c.py"]]
    assert aggregate_by_frequency(lists, ["a.py", "b.py", "c.py"]) == ["a.py", "b.py", "c.py"]
    # equal counts: better mean position wins
    assert aggregate_by_frequency([["x.py", "y.py"], ["y.py", "x.py"], ["y.py"]], ["x.py", "y.py"])[0] == "y.py"


def test_reciprocal_rank_fusion_with_k_zero():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=0)
    # a: 1, b: 1/2 + 1, c: 1/3, d: 1/2
    assert fused == ["b", "a", "d", "c"]
    assert reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=60) == ["a", "b"]  # tie: best rank, then order
    with pytest.raises(ValueError, match="k must be >= 0"):
        reciprocal_rank_fusion([["a"]], k=-1)


def test_recall_needs_every_gold_file():
    ranking = ["a.py", "b.py", "c.py"]
    assert [recall_at_k(ranking, {"a.py", "c.py"}, k) for k in (1, 2, 3)] == [0.0, 0.0, 1.0]
    assert recall_at_k(ranking, set(), 3) == 0.0
    table = recall_table([(ranking, {"a.py"}), (ranking, {"c.py"})], ks=(1, 3))
    assert table == {1: 0.5, 3: 1.0}


def test_code_tokens_split_identifiers():
    assert code_tokens("parseHttpHeader(word_count) the") == [
        "parsehttpheader",
        "parse",
        "http",
        "header",
        "word_count",
        "word",
        "count",
    ]


def test_bm25_finds_the_buggy_files_of_every_fixture(fixture_checkouts):
    cache = IndexCache()
    for path, instance in fixture_checkouts.values():
        repo = Repository.open(path, instance["base_commit"])
        ranking = cache.get(repo).rank(instance["problem_statement"])
        assert recall_at_k(ranking, gold_files(instance), 3) == 1.0, ranking


def test_index_is_built_once_per_commit_and_reused(fixture_checkouts):
    path, instance = fixture_checkouts["intervals"]
    repo = Repository.open(path, instance["base_commit"])
    cache = IndexCache()
    first = localize(instance["problem_statement"], repo, cache=cache)
    second = localize("Interval end before start raises ValueError", repo, cache=cache)
    assert cache.builds == 1
    assert first.retrieved[0] == "intervals/merge.py" and second.retrieved[0] == "intervals/core.py"
    head = Repository.open(path, "HEAD")  # another commit: another index
    cache.get(head)
    assert cache.builds == 2


def test_bm25_reads_the_base_commit_not_the_working_tree(fixture_checkouts, tmp_path):
    path, instance = fixture_checkouts["textkit"]
    repo = Repository.open(path, instance["base_commit"])
    assert "Later work" not in repo.read(["README.md"])["README.md"]
    with pytest.raises(RepositoryError, match="unknown commit"):
        Repository.open(path, "0" * 40)
    with pytest.raises(RepositoryError, match="not a git checkout"):
        Repository.open(tmp_path, "HEAD")


def test_bm25_on_a_larger_synthetic_repository_answers_fast():
    files = {f"pkg/module_{i}.py": f"def helper_{i}(value):\n    return value * {i}\n" for i in range(800)}
    files["pkg/parser.py"] = "def parse_header(line):\n    key, value = line.split(':')\n"
    retriever = BM25Retriever(files)
    start = time.perf_counter()
    ranking = retriever.rank("parse_header crashes on a header line without a colon", 5)
    assert time.perf_counter() - start < 0.5
    assert ranking[0] == "pkg/parser.py"


def test_generation_localisation_votes_over_rollouts(fixture_checkouts):
    path, instance = fixture_checkouts["inventory"]
    repo = Repository.open(path, instance["base_commit"])
    generator = ScriptedGenerator(
        localization=[
            "<think>prices</think>```\ninventory/pricing.py\ninventory/cart.py\n```",
            "```\ninventory/pricing.py\ninventory/made_up.py\n```",
            "```\ninventory/stock.py\n```",
            "no list at all",
        ]
    )
    result = localize(instance["problem_statement"], repo, generator=generator, rollouts=4, top_n=3)
    assert generator.calls[0][1] == 4
    prompt = generator.calls[0][2]["messages"][0]["content"]
    assert "inventory/\n    __init__.py\n    cart.py" in prompt and "at most 3 files" in prompt
    # pricing.py: 2 votes; stock.py and cart.py: 1 vote each, stock.py at a better position
    assert result.generated == ["inventory/pricing.py", "inventory/stock.py", "inventory/cart.py"]
    assert result.parsed[1] == ["inventory/pricing.py", "inventory/made_up.py"]
    # fusion: pricing.py is first by generation and second by retrieval
    assert result.fused[:2] == ["inventory/pricing.py", "inventory/cart.py"]
    assert set(result.rankings()) == {"generation", "retrieval", "fusion"}


def _tiny_bert(path):
    """A randomly initialised 2-layer BERT and its WordPiece tokenizer, saved at ``path``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "merge",
        "interval",
        "py",
        ".",
        "/",
        "_",
        "pkg",
    ]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    tokenizer = BertTokenizerFast(vocab={token: i for i, token in enumerate(tokens)})
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_embedding_retriever_with_a_local_model(tmp_path):
    model = _tiny_bert(tmp_path / "encoder")
    files = {
        "pkg/a.py": "alpha beta gamma",
        "pkg/b.py": "delta epsilon zeta",
        "pkg/long.py": " ".join(["eta"] * 30) + " theta merge interval",
    }
    retriever = EmbeddingRetriever(str(model), files, max_length=12)
    assert sorted(retriever.paths) == sorted(files)
    # identical text gets cosine 1, so the file that holds the query ranks first
    assert retriever.rank("pkg / b . py delta epsilon zeta")[0] == "pkg/b.py"
    # a long file is split into windows and scores its best one (the last window here)
    scores = retriever.scores("eta eta eta eta eta eta eta eta eta eta")
    assert max(scores, key=scores.get) == "pkg/long.py"
    assert all(-1.0 - 1e-6 <= s <= 1.0 + 1e-6 for s in scores.values())
    cache = IndexCache()
    with pytest.raises(ValueError, match="at least one file"):
        EmbeddingRetriever(str(model), {})
    assert cache.builds == 0


def _git_repo(path, files):
    """A one-commit git checkout of ``files`` at ``path``; returns the opened Repository."""
    import subprocess

    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, env={**env, "PATH": "/usr/bin:/bin"})
    return Repository.open(path, "HEAD")


def test_test_files_are_left_out_of_file_level_localisation(tmp_path):
    """Agentless drops every path with a folder or file name starting with "test" before
    file-level localisation: on a realistic layout the tests repeat the issue's words and
    would otherwise crowd the gold file out of the top ranks."""
    issue = "parse_duration('1h30m') returns 30 minutes: parse_duration ignores the hours of a duration"
    test_body = "\n".join(
        f"def test_parse_duration_{i}():\n    assert parse_duration('{i}h') == duration_hours({i})\n" for i in range(8)
    )
    files = {
        "timekit/__init__.py": "from timekit.durations import parse_duration\n",
        "timekit/durations.py": "def parse_duration(text):\n    minutes = int(text.split('h')[-1].rstrip('m'))\n"
        "    return minutes\n",
        "timekit/clock.py": "def now():\n    return 0\n",
        "tests/test_durations.py": test_body,
        "timekit/tests/test_parse.py": test_body,
        "testing_utils.py": "def duration_hours(n):\n    return parse_duration(f'{n}h')  # parse duration hours\n",
    }
    repo = _git_repo(tmp_path / "repo", files)
    generator = ScriptedGenerator(localization=["```\ntests/test_durations.py\ntimekit/durations.py\n```"])
    result = localize(issue, repo, generator=generator, rollouts=1, top_n=3)
    prompt = generator.calls[0][2]["messages"][0]["content"]
    assert "durations.py" in prompt and "test_durations.py" not in prompt and "testing_utils.py" not in prompt
    for ranking in result.rankings().values():
        assert ranking and not any(part.startswith("test") for path in ranking for part in path.split("/"))
    assert result.retrieved[0] == result.fused[0] == "timekit/durations.py"
    # the old behaviour stays available as an option
    with_tests = localize(issue, repo, include_tests=True)
    assert any(path.startswith("tests/") for path in with_tests.retrieved)
