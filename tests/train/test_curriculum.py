"""The length curriculum's stop rule as the paper states it (SPEC section 5): a sub-stage runs
until its truncation ratio *reaches* the threshold, judged on a moving average."""

from cascade_rl.train.curriculum import TruncationStopRule


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
