"""Which prompts each RL step trains (SPEC sections 5-6): the engine-neutral prompt schedule."""

import pytest

from cascade_rl.recipe import DynamicFilter
from cascade_rl.train.schedule import PromptSchedule


def schedule(prompts=8, batch=2, thinking="think", enabled=False, seed=0, **filter_options):
    return PromptSchedule(
        list(range(prompts)) if isinstance(prompts, int) else prompts,
        prompts_per_batch=batch,
        thinking=thinking,
        dynamic_filter=DynamicFilter(enabled=enabled, **filter_options),
        seed=seed,
    )


def run(sched, steps, outcome, *, late=True):
    """Draw ``steps`` steps; each prompt's rollouts score ``outcome(prompt)`` (a list). With
    ``late``, a step's results arrive after the next step was drawn (TRL's data loader)."""
    draws, waiting = [], None
    for _ in range(steps):
        draw = sched.draw()
        draws.append(draw)
        if late and waiting is not None:
            sched.record(*waiting)
        results = (
            draw.step,
            [p for p in draw.prompts for _ in outcome(p)],
            [r for p in draw.prompts for r in outcome(p)],
        )
        if late:
            waiting = results
        else:
            sched.record(*results)
    return draws, waiting


def test_a_step_is_exactly_prompts_per_batch_and_an_epoch_covers_every_prompt_once():
    draws, _ = run(schedule(prompts=12, batch=4, thinking="no_think"), 6, lambda p: [1.0, 0.0])
    assert [d.step for d in draws] == [1, 2, 3, 4, 5, 6]
    assert all(len(d.prompts) == 4 and d.modes == ("no_think",) * 4 for d in draws)
    first_epoch = [p for d in draws[:3] for p in d.prompts]
    second_epoch = [p for d in draws[3:] for p in d.prompts]
    assert sorted(first_epoch) == sorted(second_epoch) == list(range(12))
    assert first_epoch != second_epoch  # a new permutation per epoch


def test_half_mode_puts_exactly_half_of_every_step_in_each_mode():
    draws, _ = run(schedule(prompts=10, batch=6, thinking="half"), 20, lambda p: [1.0, 0.0])
    assert all(d.modes.count("think") == d.modes.count("no_think") == 3 for d in draws)


def test_odd_batch_cannot_be_split_half_and_half():
    with pytest.raises(ValueError, match="even"):
        run(schedule(batch=5, thinking="half"), 1, lambda p: [1.0])


def test_epoch_filter_drops_all_solved_and_all_failed_prompts_exactly():
    # prompts 0-2 always solved, 3-5 never, 6-11 mixed; re-adding off to make the check exact
    def outcome(p):
        return [1.0, 1.0] if p < 3 else [0.0, 0.0] if p < 6 else [1.0, 0.0]

    sched = schedule(prompts=12, batch=2, enabled=True, readd_easy=0.0, readd_hard=0.0)
    draws, _ = run(sched, 9, outcome)
    first_epoch = [p for d in draws[:6] for p in d.prompts]
    second_epoch = [p for d in draws[6:9] for p in d.prompts]
    assert sorted(first_epoch) == list(range(12))
    assert sorted(second_epoch) == [6, 7, 8, 9, 10, 11]  # decided on epoch 0's results, late ones too
    assert sched.filter.counts["dropped_easy"] == 3 and sched.filter.counts["dropped_hard"] == 3


def test_decisions_do_not_depend_on_when_results_arrive():
    def outcome(p):
        return [1.0] * 4 if p % 3 == 0 else [0.0] * 4 if p % 3 == 1 else [1.0, 0.0, 0.0, 1.0]

    early, _ = run(schedule(prompts=20, batch=4, enabled=True, seed=3), 30, outcome, late=False)
    late, _ = run(schedule(prompts=20, batch=4, enabled=True, seed=3), 30, outcome, late=True)
    assert early == late


def test_results_more_than_a_step_late_are_refused():
    sched = schedule()
    sched.draw()
    sched.draw()
    with pytest.raises(RuntimeError, match="read more than one step ahead"):
        sched.draw()  # step 3 needs step 1's results


def test_checkpoint_resumes_the_same_sequence_even_after_the_next_step_was_drawn():
    def outcome(p):
        return [1.0, 1.0] if p < 5 else [0.0, 0.0] if p < 9 else [1.0, 0.0]

    uninterrupted, _ = run(schedule(prompts=16, batch=3, enabled=True, seed=5, readd_hard=0.5), 24, outcome)

    first = schedule(prompts=16, batch=3, enabled=True, seed=5, readd_hard=0.5)
    draws, waiting = run(first, 10, outcome)  # step 10 drawn, step 9 recorded, step 10 not yet
    first.draw()  # the data loader already read step 11 ...
    first.record(*waiting)  # ... when step 10's results came in; then the process died
    state = first.checkpoint(trained_through=10)

    resumed = schedule(prompts=16, batch=3, enabled=True, seed=5, readd_hard=0.5)
    resumed.load_state_dict(state)
    rest, _ = run(resumed, 14, outcome)
    assert draws + rest == uninterrupted


def test_digest_tells_whether_two_schedules_agree():
    a, b = schedule(seed=1), schedule(seed=1)
    run(a, 3, lambda p: [1.0])
    run(b, 3, lambda p: [1.0])
    assert a.digest() == b.digest()
    run(b, 1, lambda p: [1.0])
    assert a.digest() != b.digest()


def test_a_narrower_prompt_set_is_respected_after_a_hand_over():
    wide = schedule(prompts=10, batch=2)
    run(wide, 3, lambda p: [1.0], late=False)
    narrow = schedule(prompts=[0, 1, 2, 3], batch=2)
    narrow.load_state_dict(wide.checkpoint(trained_through=3))
    draws, _ = run(narrow, 6, lambda p: [1.0], late=False)
    assert {p for d in draws for p in d.prompts} <= {0, 1, 2, 3}


def test_an_epoch_the_filter_empties_refills_instead_of_stalling():
    sched = schedule(prompts=4, batch=2, enabled=True, readd_easy=0.0)
    draws, _ = run(sched, 8, lambda p: [1.0, 1.0])
    assert all(len(d.prompts) == 2 for d in draws)
    assert sched.filter.counts["refilled_empty_epoch"] >= 1


def test_a_data_set_that_trains_again_after_another_continues_its_own_epoch_and_filter():
    """Sub-stages A, B, A on two data sets: B's schedule numbers its steps on from A's; A's comes
    back with its epoch and the verdicts of all its steps (the last two's results, which the lag
    had not let in yet, are visible by then), numbered on from B's."""
    solved_by_all = lambda p: [1.0, 1.0] if p < 3 else [0.0, 1.0]  # noqa: E731  prompts 0-2: too easy
    a = schedule(prompts=8, batch=2, enabled=True, seed=3, readd_easy=0.0)
    draws, waiting = run(a, 4, solved_by_all)  # steps 1-4: epoch 0, every prompt once
    a.record(*waiting)
    handover = a.checkpoint(trained_through=4)
    b = schedule(prompts=5, batch=2, seed=3)
    b.continue_at(5)
    b_draws, _ = run(b, 2, lambda p: [0.5, 1.0], late=False)
    assert [d.step for d in b_draws] == [5, 6] and b.filter.epoch == 0

    again = schedule(prompts=8, batch=2, enabled=True, seed=3, readd_easy=0.0)
    again.load_state_dict(handover)
    recorded = lambda s: sum(r.total for r in s.filter.current.values())  # noqa: E731
    assert recorded(again) == 8  # steps 1-2: the lag held steps 3-4 back
    again.continue_at(7)
    assert recorded(again) == 16 and again.ingested_through == 6 and not again.drawn
    more, _ = run(again, 3, solved_by_all)
    assert [d.step for d in more] == [7, 8, 9] and more[0].epochs[0] == 1  # epoch 0 had ended
    assert all(p >= 3 for d in more for p in d.prompts)  # every too-easy prompt dropped, steps 3-4's too
    with pytest.raises(ValueError, match="step 9 was drawn already"):
        again.continue_at(9)
