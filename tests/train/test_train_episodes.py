"""Multi-turn rollouts in the on-policy trainer: a step of toy-office episodes played through TRL's
GRPOTrainer (the cascade's rollout hook), each episode's verdict its reward, and the loss only on
the model's own tokens -- the gradient of the loss with respect to every tool-result token's
log-probability is exactly zero, and non-zero on the model's tokens."""

from __future__ import annotations

import json
import random

import pytest
import torch

from cascade_rl.chat import IM_END, with_mode, with_tools
from cascade_rl.llm.episodes import Transcript
from cascade_rl.train.episodes import EpisodeSettings, episode_results, episode_score, start_episodes
from cascade_rl.world import office


def office_rows(count: int, seed: int = 0) -> tuple[list[dict], list[office.OfficeTask]]:
    rng = random.Random(seed)
    chosen = [office.office_task(rng) for _ in range(count)]
    rows = []
    for index, task in enumerate(chosen):
        row = office.rl_row(task, f"t{index}")
        reference = {k: v for k, v in row.items() if k not in ("prompt", "domain")}
        rows.append(
            {
                "prompt": with_mode(with_tools(row["prompt"], row["tools"]), "no_think"),
                "_ref": json.dumps(reference),
                "_pidx": index,
                "_mode": "no_think",
                "_domain": "workplace",
            }
        )
    return rows, chosen


def call_text(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def test_settings_exist_only_for_stages_with_multi_turn_domains():
    class Stage:
        max_turns, max_turn_tokens = 4, 32

    assert EpisodeSettings.of(Stage(), ["math", "mcqa"]) is None
    settings = EpisodeSettings.of(Stage(), ["mcqa", "workplace"], {"workplace": {"x": 1}})
    assert (settings.max_turns, settings.max_turn_tokens, settings.options) == (4, 32, {"workplace": {"x": 1}})


def test_rows_become_episodes_with_the_stages_turn_budget_and_results_carry_the_verdict():
    rows, chosen = office_rows(2)
    plain = {"prompt": [{"role": "user", "content": "2+2?"}], "_ref": "{}", "_pidx": 9, "_mode": "think",
             "_domain": "mcqa"}  # fmt: skip
    episodes = start_episodes([*rows, plain], [r["prompt"] for r in [*rows, plain]], EpisodeSettings(max_turns=1))
    assert episodes[2] is None and all(e.max_steps == 1 for e in episodes[:2])
    name, arguments = chosen[0].calls[0]
    episodes[0].step(call_text(name, arguments))  # the step budget ends it; the call counts
    episodes[1].step("nothing to do")
    transcripts = [Transcript([1, 2, 3], [1, 1, 1], [0.0] * 3, turns=1, end=e.end) for e in episodes[:2]]
    column, records = episode_results(rows, episodes[:2], transcripts)
    assert [entry["reward"] for entry in column] == [0.0, 0.0]  # a look-up alone changes nothing
    assert episode_score(column[0]).details["calls"] == 1 and column[0]["model_tokens"] == 3
    assert records[0]["calls"] == [{"name": name, "arguments": json.dumps(arguments)}]
    assert records[0]["end"] == "step budget" and records[1]["end"] == "answered"
    assert records[0]["prompt"] == 0 and records[0]["domain"] == "workplace"


def test_an_environment_that_fails_to_judge_gives_no_verdict():
    rows, _ = office_rows(1)
    (episode,) = start_episodes(rows, [rows[0]["prompt"]], EpisodeSettings(max_turns=2))
    episode.ground_truth = "not json"  # the verdict's replay raises
    column, records = episode_results(rows, [episode], [Transcript()])
    assert column[0]["masked"] and records[0]["reward"] is None and "no_verdict" in records[0]


class ScriptedTrainer:
    """Builds the on-policy trainer whose "model" answers with scripted turns: the first rollout of
    each prompt makes the reference calls, the second a look-up the tool rejects, then stops."""

    @staticmethod
    def build(checkpoint, tmp_path, rows, chosen):
        from datasets import Dataset
        from transformers import AutoTokenizer
        from trl import GRPOConfig

        from cascade_rl.recipe import DynamicFilter
        from cascade_rl.train import trl_backend
        from cascade_rl.train.schedule import PromptSchedule
        from cascade_rl.train.verification import RolloutScorer

        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        end = tokenizer.convert_tokens_to_ids(IM_END)
        scripts = {task.request: [call_text(n, a) for n, a in task.calls] + [task.answer] for task in chosen}
        wrong = {task.request: call_text(task.calls[0][0], {**task.calls[0][1], "bogus": 1}) for task in chosen}

        class Trainer(trl_backend.OnPolicyTrainer):
            seen_logps: list = []
            seen_inputs: list = []

            def _sample_turn(self, prompt_ids, max_tokens):
                self.turn_tokens, self.turn = max_tokens, self.turn + 1
                out = []
                for position, ids in enumerate(prompt_ids):
                    text = tokenizer.decode(ids)
                    request = next(r for r in scripts if r in text)
                    turn = text.count("<tool_response>")
                    if turn == 0:  # the group's first rollout calls as the reference does, the second wrongly
                        reply = scripts[request][0] if position % 2 == 0 else wrong[request]
                    else:
                        reply = "I stop here." if wrong[request] in text else scripts[request][turn]
                    out.append(tokenizer(reply, add_special_tokens=False)["input_ids"] + [end])
                return out, None

            def _compute_loss(self, model, inputs):
                self.seen_inputs.append(inputs)
                return super()._compute_loss(model, inputs)

            def _get_per_token_logps_and_entropies(self, *args, **kwargs):
                result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
                if result[0].requires_grad:
                    result[0].retain_grad()
                    self.seen_logps.append(result[0])
                return result

        count = len(rows) * 2
        trainer = Trainer(
            model=str(checkpoint),
            reward_funcs=[RolloutScorer(tokenizer)],
            args=GRPOConfig(
                str(tmp_path),
                per_device_train_batch_size=count,
                num_generations=2,
                max_completion_length=1500,
                max_steps=1,
                learning_rate=1e-3,
                loss_type="dapo",
                beta=0.0,
                use_cpu=True,
                report_to="none",
                save_strategy="no",
                logging_steps=1,
                shuffle_dataset=False,
            ),  # fmt: skip
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            schedule=PromptSchedule(
                range(len(rows)), prompts_per_batch=len(rows), thinking="no_think", dynamic_filter=DynamicFilter()
            ),
            row_of=lambda prompt, mode: prompt,
            steps=1,
            drop_idle_rollouts=False,
            episodes=EpisodeSettings(max_turns=6),
            episodes_log=tmp_path / "episodes.jsonl",
        )
        return trainer, tokenizer


@pytest.fixture(scope="module")
def trained_step(tiny_checkpoint, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("episodes")
    rows, chosen = office_rows(2, seed=1)
    trainer, tokenizer = ScriptedTrainer.build(tiny_checkpoint, tmp_path, rows, chosen)
    trainer.train()
    return trainer, tokenizer, tmp_path


def test_each_episodes_verdict_is_its_reward_and_every_episode_is_recorded(trained_step):
    trainer, _, tmp_path = trained_step
    assert trainer.scored.rewards == [1.0, 0.0, 1.0, 0.0]
    records = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [(r["step"], r["reward"], r["turns"], r["end"]) for r in records] == [
        (1, 1.0, 3, "answered"),
        (1, 0.0, 2, "answered"),
    ] * 2
    logged = trainer.state.log_history[0]
    assert (logged["reward/workplace/turns"], logged["reward/workplace/pass_rate"]) == (2.5, 0.5)
    assert logged["reward/workplace/failed_calls"] == 0.5  # the rejected look-ups: tool errors
    assert logged["completions/clipped_ratio"] == 0.0


def environment_positions(ids: list[int], tokenizer) -> list[int]:
    """Where the tool results are in a completion, read from the tokens alone (not from any mask):
    after each model turn's <|im_end|> that the sequence continues past, the template's tool turn
    up to and including the next turn's "<|im_start|>assistant\\n"."""
    start, end = tokenizer.convert_tokens_to_ids("<|im_start|>"), tokenizer.convert_tokens_to_ids(IM_END)
    tail = len(tokenizer("assistant\n", add_special_tokens=False)["input_ids"])
    positions, i = [], 0
    while i < len(ids) - 1:
        if ids[i] != end:
            i += 1
            continue
        openings = [j for j in range(i + 1, len(ids)) if ids[j] == start][:2]  # the tool turn's, the assistant's
        last = openings[1] + tail
        positions += range(i + 1, last + 1)
        i = last + 1
    return positions


def test_the_loss_has_no_gradient_on_tool_results_and_has_it_on_the_models_tokens(trained_step):
    trainer, tokenizer, _ = trained_step
    (inputs,) = trainer.seen_inputs
    (logps,) = trainer.seen_logps
    lengths = inputs["completion_mask"].sum(dim=1).tolist()
    tool_tokens = torch.zeros_like(inputs["completion_mask"], dtype=torch.bool)
    for row, length in enumerate(lengths):
        ids = inputs["completion_ids"][row][: int(length)].tolist()
        tool_tokens[row, environment_positions(ids, tokenizer)] = True
    model_tokens = inputs["completion_mask"].bool() & ~tool_tokens
    assert int(tool_tokens.sum()) > 100 and int(model_tokens.sum()) > 100
    first = inputs["completion_ids"][0][tool_tokens[0]].tolist()
    assert tokenizer.decode(first).count("<tool_response>") == 2  # the two calls' results
    grad = logps.grad
    assert torch.count_nonzero(grad[tool_tokens]) == 0
    assert bool((grad[model_tokens] != 0).all())  # every model token of a rollout with an advantage learns
