"""Epoch-level dynamic filtering decisions (SPEC section 5); the schedule that uses them is
tested in test_schedule.py."""

from cascade_rl.recipe import DynamicFilter
from cascade_rl.train.filtering import FilterState, dataset_index


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


def test_dataset_rows_hold_one_row_per_prompt_or_two_in_half_mode():
    assert dataset_index(3, "no_think", "no_think") == 3 and dataset_index(3, "no_think", "half") == 7
