"""Idle rollouts (zero advantage, or every token masked) leave the update's micro-batch, and each
forward pass runs at its own chunk's width."""

import torch

from cascade_rl.train.learning_rows import attended_span, can_drop_idle_rollouts, learning_mask, learning_rows


def micro_batch():
    completion_mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]])
    return {
        "prompt_ids": torch.arange(12).reshape(4, 3),
        "prompt_mask": torch.tensor([[0, 1, 1], [1, 1, 1], [0, 0, 1], [0, 1, 1]]),
        "completion_ids": torch.arange(16).reshape(4, 4),
        "completion_mask": completion_mask,
        "advantages": torch.tensor([0.75, 0.0, -1.25, -0.5]),  # row 1: no variance; row 2: overlong (all masked)
        "sampling_per_token_logps": torch.randn(4, 4),
        "num_items_in_batch": torch.tensor(123),
    }


def test_only_rollouts_with_advantage_and_tokens_learn():
    assert learning_mask(micro_batch()).tolist() == [True, False, False, True]


def test_the_kept_rows_keep_their_values_and_the_step_total_is_untouched():
    inputs = micro_batch()
    kept, rows = learning_rows(inputs)
    assert rows == 2
    assert kept["advantages"].tolist() == [0.75, -0.5]
    assert kept["completion_ids"].tolist() == [[0, 1], [12, 13]]  # padding past the longest kept one cut
    assert kept["completion_mask"].tolist() == [[1, 1], [1, 0]]
    assert torch.equal(kept["sampling_per_token_logps"], inputs["sampling_per_token_logps"][[0, 3], :2])
    assert kept["prompt_ids"].tolist() == [[0, 1, 2], [9, 10, 11]]
    assert kept["num_items_in_batch"].item() == 123  # the loss's denominator still counts every token


def test_rows_are_padded_with_idle_ones_to_what_other_processes_keep():
    kept, rows = learning_rows(micro_batch(), rows_everywhere=3)
    assert rows == 2 and kept["advantages"].tolist() == [0.75, 0.0, -0.5]  # row 1 (idle) fills, in order


def test_a_micro_batch_without_learning_rows_is_one_masked_token():
    inputs = micro_batch()
    inputs["advantages"] = torch.zeros(4)
    kept, rows = learning_rows(inputs)
    assert rows == 0
    assert kept["completion_ids"].shape == (1, 1) and kept["completion_mask"].sum() == 0
    assert kept["prompt_ids"].tolist() == [[2]] and kept["prompt_mask"].tolist() == [[1]]


def test_nothing_changes_when_every_rollout_learns():
    inputs = micro_batch()
    inputs["advantages"] = torch.ones(4)
    inputs["completion_mask"] = torch.ones(4, 4, dtype=torch.long)
    assert learning_rows(inputs)[0] is inputs


def test_the_drop_is_only_allowed_where_it_cannot_change_the_gradient():
    assert can_drop_idle_rollouts("dapo", 0.0, 0.0, 1.0)
    assert not can_drop_idle_rollouts("dapo", 0.04, 0.0, 1.0)  # a KL term moves zero-advantage rollouts too
    assert not can_drop_idle_rollouts("grpo", 0.0, 0.0, 1.0)  # a per-sequence mean divides by the rows
    assert not can_drop_idle_rollouts("dapo", 0.0, 0.01, 1.0)  # an entropy bonus


def test_the_span_cuts_only_columns_no_row_attends():
    # 4 prompt columns (left-padded) then 3 completion columns (right-padded)
    attention = torch.tensor([[0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 0]])
    assert attended_span(attention, 3) == (2, 1)
    assert attended_span(torch.ones(2, 7), 3) == (0, 0)


def test_the_span_keeps_a_prompt_and_one_completion_column():
    masked_completions = torch.tensor([[0, 1, 1, 0, 0, 0]])  # a rollout left out of the loss
    assert attended_span(masked_completions, 3) == (1, 2)
    assert attended_span(torch.zeros(2, 5), 2) == (0, 0)
    no_prompt = torch.tensor([[0, 0, 1, 1]])
    assert attended_span(no_prompt, 2) == (2, 0)
    assert attended_span(torch.tensor([[0, 0, 0, 1]]), 2) == (2, 0)  # the lead stops at the prompt's end
