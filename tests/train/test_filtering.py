"""Epoch-level dynamic filtering and thinking-mode batches (SPEC section 5)."""

import itertools
import random

import pytest

from cascade_rl.recipe import DynamicFilter
from cascade_rl.train.filtering import FilterState, PromptSampler, dataset_index, split_modes


def run_epoch(state, outcomes):
    """Record one epoch: outcomes[prompt] = list of rewards."""
    for prompt, rewards in outcomes.items():
        for reward in rewards:
            state.record(prompt, reward)
        state.close_prompt_epoch(prompt)


def test_readd_probabilities_match_the_paper_statistically():
    n = 4000
    state = FilterState(DynamicFilter(enabled=True), seed=7)
    outcomes = {p: [1.0] * 8 if p < n else [0.0] * 8 for p in range(2 * n)}  # n easy, n hard
    run_epoch(state, outcomes)
    state.epoch = 1
    easy = sum(state.admit(p) for p in range(n))
    hard = sum(state.admit(p) for p in range(n, 2 * n))
    # Binomial(4000, 0.01): mean 40, sd 6.3; Binomial(4000, 0.10): mean 400, sd 19
    assert 40 - 4 * 6.3 < easy < 40 + 4 * 6.3
    assert 400 - 4 * 19 < hard < 400 + 4 * 19
    assert state.counts["readded_easy"] == easy and state.counts["dropped_hard"] == n - hard


def test_mixed_prompts_are_kept_and_skipped_rollouts_do_not_count():
    state = FilterState(DynamicFilter(enabled=True), seed=0)
    run_epoch(state, {0: [1.0, 0.0], 1: [1.0, None, None], 2: [None, None]})
    state.epoch = 1
    assert state.admit(0)  # mixed -> kept
    assert state.last[1].total == 1  # the two overlong-skipped rollouts did not count
    assert state.admit(2)  # never scored -> kept
    assert state.counts["kept"] == 2


def test_disabled_filter_keeps_everything():
    state = FilterState(DynamicFilter(enabled=False))
    run_epoch(state, {0: [1.0] * 4, 1: [0.0] * 4})
    assert state.admit(0) and state.admit(1)


def test_filter_decisions_are_seeded_and_survive_a_round_trip():
    def decisions(seed):
        state = FilterState(DynamicFilter(enabled=True), seed=seed)
        run_epoch(state, {p: [0.0] * 4 for p in range(300)})
        state.epoch = 3
        return [state.admit(p) for p in range(300)], state

    first, state = decisions(1)
    assert first == decisions(1)[0] and first != decisions(2)[0]
    restored = FilterState.from_dict(DynamicFilter(enabled=True), state.to_dict())
    assert restored.last == state.last and restored.epoch == state.epoch


def test_half_mode_puts_exactly_half_of_every_batch_in_each_mode():
    state = FilterState(DynamicFilter())
    sampler = PromptSampler(10, prompts_per_batch=6, rollouts=4, thinking="half", state=state, total_steps=50)
    stream = list(itertools.islice(iter(sampler), 6 * 4 * 20))
    for step in range(20):
        batch = stream[step * 24 : (step + 1) * 24]
        groups = [batch[i : i + 4] for i in range(0, 24, 4)]
        assert all(len(set(g)) == 1 for g in groups)  # a group is one prompt in one mode
        modes = [g[0] % 2 for g in groups]  # row 2p = think, 2p+1 = no_think
        assert modes.count(0) == 3 and modes.count(1) == 3


def test_single_mode_uses_prompt_rows_directly_and_covers_the_epoch():
    state = FilterState(DynamicFilter())
    sampler = PromptSampler(8, prompts_per_batch=4, rollouts=2, thinking="no_think", state=state, total_steps=10)
    first_epoch = list(itertools.islice(iter(sampler), 8 * 2))[::2]
    assert sorted(first_epoch) == list(range(8))
    assert dataset_index(3, "no_think", "no_think") == 3 and dataset_index(3, "no_think", "half") == 7


def test_sampler_drops_filtered_prompts_in_the_next_epoch():
    state = FilterState(DynamicFilter(enabled=True, readd_hard=0.0, readd_easy=0.0), seed=0)
    sampler = PromptSampler(8, prompts_per_batch=2, rollouts=1, thinking="think", state=state, total_steps=100)
    stream = iter(sampler)
    first = [next(stream) for _ in range(8)]
    rewards = {p: [1.0, 1.0] if p < 4 else [0.0, 0.0] if p < 6 else [1.0, 0.0] for p in range(8)}
    for prompt in first:  # prompts 0-3 always solved, 4-5 never, 6-7 mixed
        for reward in rewards[prompt]:
            state.record(prompt, reward)
    second = [next(stream) for _ in range(2)]
    assert set(second) <= {6, 7}


def test_odd_batch_cannot_be_split_half_and_half():
    with pytest.raises(ValueError, match="even"):
        split_modes(5, "half", random.Random(0))
