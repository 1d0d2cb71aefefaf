"""The curriculum's stop rules as the paper states them: a length sub-stage runs until its
truncation ratio *reaches* the threshold, judged on a moving average (SPEC section 5); the SWE
16K warm-up runs until its reward plateaus (SPEC section 6), the step cap a fallback."""

import pytest

from cascade_rl.recipe import CurriculumStep
from cascade_rl.train.curriculum import RewardPlateauRule, SubstageStop, TruncationStopRule


def first_stop(rule, ratios):
    for step, ratio in enumerate(ratios, start=1):
        if rule.observe(step, ratio):
            return step
    return None


def test_compression_substage_starting_high_stops_when_the_ratio_has_fallen_to_the_threshold():
    ratios = [0.45, 0.40, 0.38, 0.30, 0.25, 0.18, 0.12, 0.10, 0.08, 0.07, 0.06, 0.05]
    rule = TruncationStopRule(0.10, direction="falls", window=3, min_steps=4)
    # the old rule (stop at the first step >= 10%) would have stopped at step 1
    assert first_stop(rule, ratios) == 9  # mean(0.12, 0.10, 0.08) <= 0.10
    assert abs(rule.ratio - 0.10) < 1e-9


def test_extension_substage_starting_low_stops_when_the_ratio_has_risen_to_the_threshold():
    ratios = [0.01, 0.02, 0.02, 0.04, 0.07, 0.09, 0.12, 0.13, 0.15]
    rule = TruncationStopRule(0.10, direction="rises", window=3, min_steps=4)
    assert first_stop(rule, ratios) == 8  # mean(0.09, 0.12, 0.13) >= 0.10


def test_auto_takes_the_side_of_the_first_window():
    assert first_stop(TruncationStopRule(0.10, window=2, min_steps=2), [0.5, 0.4, 0.2, 0.1, 0.05]) == 5
    assert first_stop(TruncationStopRule(0.10, window=2, min_steps=2), [0.0, 0.02, 0.2, 0.3]) == 3


def test_a_single_spike_does_not_stop_the_substage():
    ratios = [0.02, 0.03, 0.30, 0.02, 0.03, 0.02, 0.03]
    assert first_stop(TruncationStopRule(0.10, direction="rises", window=5, min_steps=1), ratios) is None


def test_no_stop_before_the_minimum_number_of_steps():
    ratios = [0.2] * 10
    assert first_stop(TruncationStopRule(0.10, direction="rises", window=2, min_steps=6), ratios) == 6


def test_no_threshold_never_stops():
    assert first_stop(TruncationStopRule(None), [1.0] * 50) is None


def test_a_rising_reward_never_plateaus_and_a_flat_one_stops_once_two_windows_are_seen():
    rising = [0.1 + 0.02 * step for step in range(40)]  # +0.06 from one window of 3 to the next
    assert first_stop(RewardPlateauRule(3, tolerance=0.05), rising) is None
    flat = [0.4] * 20
    rule = RewardPlateauRule(3, tolerance=0.0)
    assert first_stop(rule, flat) == 6  # the first step with two full windows: 0.4 - 0.4 <= 0
    assert rule.windows == ([0.4] * 3, [0.4] * 3) and rule.gain == 0.0


def test_the_plateau_is_judged_on_window_means_not_on_single_steps():
    # learning, with noise: one step even falls back, but the windows keep improving by > 0.03
    noisy = [0.10, 0.12, 0.11, 0.20, 0.14, 0.19, 0.22, 0.21, 0.25, 0.27, 0.26, 0.28]
    assert first_stop(RewardPlateauRule(3, tolerance=0.03), noisy) is None
    # then it levels off: step 15's windows still gain 0.033, step 16's 0.027 (<= 0.03)
    levelled = noisy + [0.30, 0.31, 0.30, 0.31, 0.30, 0.31]
    rule = RewardPlateauRule(3, tolerance=0.03)
    assert first_stop(rule, levelled) == rule.stopped_at == 16
    assert rule.windows == ([0.26, 0.28, 0.30], [0.31, 0.30, 0.31]) and rule.gain == pytest.approx(0.08 / 3)


def test_a_falling_reward_has_plateaued_too():
    assert first_stop(RewardPlateauRule(2, tolerance=0.01), [0.5, 0.5, 0.4, 0.3]) == 4


def test_no_plateau_stop_before_the_minimum_number_of_steps_or_without_a_window():
    assert first_stop(RewardPlateauRule(2, tolerance=0.0, min_steps=7), [0.2] * 10) == 7
    assert first_stop(RewardPlateauRule(None), [0.2] * 50) is None


def test_the_step_says_which_rule_ended_it_at_which_step_and_on_what():
    step = CurriculumStep(max_response_length=8, plateau_window=2, plateau_tolerance=0.0, stop_min_steps=1)
    rules = SubstageStop(step)
    logged = [{"reward/mean": r, "truncation_ratio": 0.0} for r in (0.1, 0.3, 0.2, 0.2)]
    ended = [rules.observe(number, metrics) for number, metrics in enumerate(logged, start=1)]
    assert ended == [False, False, False, True]
    assert rules.summary() == {
        "stopped_by": "reward_plateau",
        "stopped_at": 4,
        "plateau": {"earlier_rewards": [0.1, 0.3], "last_rewards": [0.2, 0.2], "gain": pytest.approx(0.0)},
    }
    assert "reward plateau at step 4" in rules.explain()
    truncation = SubstageStop(
        CurriculumStep(
            max_response_length=8, stop_truncation_ratio=0.1, stop_direction="rises", stop_window=1, stop_min_steps=1
        )
    )
    assert truncation.observe(1, {"truncation_ratio": 0.5, "reward/mean": 0.0})
    assert truncation.summary() == {"stopped_by": "truncation_ratio", "stopped_at": 1, "truncation_ratio": 0.5}
    neither = SubstageStop(CurriculumStep(max_response_length=8))
    assert not any(neither.observe(n, {"reward/mean": 0.0, "truncation_ratio": 1.0}) for n in range(1, 50))
    assert neither.summary() == {"stopped_by": "max_steps"}


class _Trainer:
    """A sub-stage's trainer as TRL's is: its reward function refers back to it (a cycle)."""

    def __init__(self):
        self.reward = lambda: self
        self.weights = bytearray(1 << 20)


def test_a_finished_substages_trainer_is_freed_before_the_next_substage_starts(tmp_path):
    import gc
    import weakref

    from cascade_rl.train.curriculum import run_substages

    alive_at_start = []
    trainers = []

    def run_substage(index, step, model, substage_dir):
        alive_at_start.append([ref() is not None for ref in trainers])
        trainer = _Trainer()
        trainers.append(weakref.ref(trainer))
        (substage_dir / "model").mkdir()
        return {"steps": 1}

    gc.disable()  # only the runner's own collection may free the cycle
    try:
        run_substages([1, 2, 3], tmp_path, tmp_path / "start", run_substage)
    finally:
        gc.enable()
    assert alive_at_start == [[], [False], [False, False]]
