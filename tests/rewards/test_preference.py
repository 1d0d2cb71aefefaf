"""The local reward model of the RLHF / IF+RM rewards: how much of a conversation it reads
(SPEC section 4; the paper recipes score up to 16K tokens), and how failures surface."""

import pytest
from reward_model_assets import MAX_POSITIONS, ProxyServer, build_reward_model

from cascade_rl.recipe import load_recipe
from cascade_rl.rewards.preference import RewardModel, length_batches, load_reward_model, rm_scores, score_batch


@pytest.fixture(scope="module")
def rm_path(tmp_path_factory):
    return build_reward_model(tmp_path_factory.mktemp("rm"))


@pytest.fixture(scope="module")
def model(rm_path):
    return RewardModel(rm_path, device="cpu")


def long_conversation(repeats):
    return [
        {"role": "user", "content": "Summarise this story. " + "The fox ran over the hill and back. " * repeats},
        {"role": "assistant", "content": "A fox ran; the end."},
    ]


def test_the_whole_conversation_is_scored_up_to_the_models_own_length(model):
    conversation = long_conversation(200)
    ids = model.encode(model.render(conversation), max_length=10**6)
    assert 4096 < len(ids) < MAX_POSITIONS and model.max_length == MAX_POSITIONS
    (score,) = model.score([conversation])
    assert score == pytest.approx(model.score_ids([ids])[0], abs=1e-5)
    assert score != pytest.approx(model.score_ids([ids[-4096:]])[0], abs=1e-4)  # no longer cut at 4,096 tokens


def test_an_overlong_conversation_keeps_its_last_tokens(model):
    conversation = long_conversation(40)
    ids = model.encode(model.render(conversation))
    assert len(ids) > 300
    (score,) = model.score([conversation], max_length=300)
    assert score == pytest.approx(model.score_ids([ids[-300:]])[0], abs=1e-5)  # the answer and its end kept
    assert score != pytest.approx(model.score_ids([ids[:300]])[0], abs=1e-4)


def test_batched_scores_equal_one_at_a_time(model):
    conversations = [long_conversation(n) for n in (1, 7, 3, 12, 2)]
    together = model.score(conversations, batch_size=4)
    alone = [model.score([c], batch_size=1)[0] for c in conversations]
    assert together == pytest.approx(alone, abs=1e-5)


def test_max_length_reaches_the_scorer_and_bad_values_are_refused(rm_path):
    requests = [{"messages": long_conversation(40)[:1], "response": "A fox ran; the end."}]
    full = score_batch(requests, reward_model=str(rm_path))[0].details["rm_score"]
    cut = score_batch(requests, reward_model=str(rm_path), max_length=300)[0].details["rm_score"]
    model = load_reward_model(str(rm_path))
    assert cut == pytest.approx(model.score([long_conversation(40)], max_length=300)[0], abs=1e-5) and cut != full
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="max_length must be a positive integer"):
            score_batch(requests, reward_model=str(rm_path), max_length=bad)


def test_evaluation_scores_raise_when_the_server_fails():
    requests = [{"messages": [{"role": "user", "content": "q"}], "response": "a"}]
    with ProxyServer(None, fail_first=99, fail_status=503) as proxy:
        with pytest.raises(RuntimeError, match="1 of 1 conversation"):
            rm_scores(requests, proxy.base_url, max_retries=0)


@pytest.mark.parametrize("path", ["recipes/nemotron-cascade-8b.yaml", "recipes/nemotron-cascade-14b-thinking.yaml"])
def test_paper_recipes_score_up_to_16k_tokens(path):
    stages = [s for s in load_recipe(path).stages if getattr(s, "domain", None) in ("preference", "if_rm")]
    assert stages
    for stage in stages:
        assert stage.reward_options[stage.domain]["max_length"] == 16384, stage.name


def test_length_batches_bound_the_padding():
    lengths = [400, 40, 45, 390, 41, 100, 395, 44, 120, 50]
    batches = length_batches(lengths, batch_size=3)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        real = sum(lengths[i] for i in batch)
        assert len(batch) <= 3 and len(batch) * max(lengths[i] for i in batch) <= 1.25 * real
    assert [[lengths[i] for i in batch] for batch in batches] == [[40, 41, 44], [45, 50], [100, 120], [390, 395, 400]]
