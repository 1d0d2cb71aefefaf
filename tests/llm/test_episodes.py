"""The agent loop over a single-turn sampler: workplace episodes of the toy office played on token
ids with a scripted model, the environment's tokens masked, budgets, one-turn rows beside
episodes, lockstep rounds, and the message loop over a generator."""

from __future__ import annotations

import json
import random

import pytest

from cascade_rl.chat import IM_END, tool_turn_text
from cascade_rl.llm.base import Sampling
from cascade_rl.llm.episodes import Budget, ChatCodec, run_episodes
from cascade_rl.rewards.environment import start_episode
from cascade_rl.world import office


@pytest.fixture(scope="module")
def tokenizer(tiny_checkpoint):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_checkpoint)


def tasks(count: int, seed: int = 0) -> list[office.OfficeTask]:
    rng = random.Random(seed)
    return [office.office_task(rng) for _ in range(count)]


def episode_of(task: office.OfficeTask, **options):
    row = office.rl_row(task, "t")
    return start_episode({"prompt": row["prompt"], "domain": "workplace", "reference": row}, options)


def call_text(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


class ScriptedModel:
    """A sampler that answers each sequence with the next reply of its row's script (the row found
    by its prompt, the turn by the tool results the sequence holds), then ``<|im_end|>``."""

    def __init__(self, tokenizer, prompts: list[list[int]], scripts: list[list[str]]):
        self.tokenizer, self.prompts, self.scripts = tokenizer, prompts, scripts
        self.calls: list[int] = []  # sequences per sampler call
        self.end = tokenizer.convert_tokens_to_ids(IM_END)

    def __call__(self, sequences, max_tokens):
        self.calls.append(len(sequences))
        out = []
        for sequence in sequences:
            row = next(i for i, p in enumerate(self.prompts) if sequence[: len(p)] == p)
            turn = self.tokenizer.decode(sequence[len(self.prompts[row]) :]).count("<tool_response>")
            ids = self.tokenizer(self.scripts[row][turn], add_special_tokens=False)["input_ids"] + [self.end]
            out.append(ids[:max_tokens])
        return out, [[-0.5] * len(ids) for ids in out]


def prompt_ids(tokenizer, task: office.OfficeTask) -> list[int]:
    row = office.rl_row(task, "t")
    from cascade_rl.chat import with_tools

    messages = with_tools(row["prompt"], row["tools"])
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)


def reference_script(task: office.OfficeTask) -> list[str]:
    return [call_text(name, arguments) for name, arguments in task.calls] + [task.answer]


def test_an_episode_plays_every_turn_and_only_the_models_tokens_are_unmasked(tokenizer):
    task = tasks(1)[0]
    prompt = prompt_ids(tokenizer, task)
    model = ScriptedModel(tokenizer, [prompt], [reference_script(task)])
    episode = episode_of(task)
    codec = ChatCodec(tokenizer, [model.end])
    (transcript,) = run_episodes([prompt], [episode], model, budget=Budget(1000), codec=codec)

    assert transcript.end == "answered" and transcript.turns == 3 and episode.score().reward == 1.0
    ids, mask = transcript.completion_ids, transcript.tool_mask
    assert len(ids) == len(mask) == len(transcript.logprobs)
    # the environment's tokens are exactly the chat template's tool turns, after each call's <|im_end|>
    masked = [ids[i] for i in range(len(ids)) if not mask[i]]
    expected = "".join(
        tool_turn_text([m], template=tokenizer.chat_template) for m in episode.messages if m["role"] == "tool"
    )
    assert tokenizer.decode(masked) == expected
    assert all(lp == 0.0 for lp, m in zip(transcript.logprobs, mask) if not m)
    model_text = tokenizer.decode([ids[i] for i in range(len(ids)) if mask[i]])
    assert model_text == "".join(reply + IM_END for reply in reference_script(task))
    # each run of masked tokens starts right after the model's end-of-turn token
    starts = [i for i in range(1, len(ids)) if mask[i - 1] and not mask[i]]
    assert len(starts) == 2 and all(ids[i - 1] == model.end for i in starts)
    assert transcript.model_tokens == sum(mask) and ids[-1] == model.end


def test_a_wrong_call_is_answered_by_the_tool_and_the_verdict_judges_the_state(tokenizer):
    task = next(t for t in tasks(20) if t.kind == "delete")
    prompt = prompt_ids(tokenizer, task)
    wrong = [call_text(task.calls[0][0], task.calls[0][1]), call_text(task.calls[1][0], {"customer_id": "nope"}), "ok"]
    model = ScriptedModel(tokenizer, [prompt], [wrong])
    episode = episode_of(task)
    (transcript,) = run_episodes(
        [prompt], [episode], model, budget=Budget(1000), codec=ChatCodec(tokenizer, [model.end])
    )
    assert transcript.end == "answered" and transcript.turns == 3
    score = episode.score()
    assert score.reward == 0.0 and score.details["differs"]


def test_tool_results_past_the_token_budget_are_cut_and_end_the_episode_truncated(tokenizer):
    task = tasks(1)[0]
    prompt = prompt_ids(tokenizer, task)
    model = ScriptedModel(tokenizer, [prompt], [reference_script(task)])
    first_turn = len(tokenizer(reference_script(task)[0], add_special_tokens=False)["input_ids"]) + 1
    episode = episode_of(task)
    budget = Budget(first_turn + 5)
    (transcript,) = run_episodes([prompt], [episode], model, budget=budget, codec=ChatCodec(tokenizer, [model.end]))
    assert transcript.end == "token budget" == episode.end and transcript.turns == 1
    assert len(transcript.completion_ids) == budget.tokens and transcript.tool_mask[-5:] == [0] * 5
    assert transcript.completion_ids[-1] != model.end  # truncated: no end-of-turn token last
    assert episode.score().details["calls"] == 1  # the look-up ran; its result was cut


def test_a_turn_cut_at_its_budget_ends_the_episode_as_truncated(tokenizer):
    task = tasks(1)[0]
    prompt = prompt_ids(tokenizer, task)
    model = ScriptedModel(tokenizer, [prompt], [reference_script(task)])
    episode = episode_of(task)
    budget = Budget(1000, turn_tokens=4)
    (transcript,) = run_episodes([prompt], [episode], model, budget=budget, codec=ChatCodec(tokenizer, [model.end]))
    assert transcript.end == "truncated" == episode.end and len(transcript.completion_ids) == 4
    assert transcript.tool_mask == [1] * 4


def test_the_step_budget_ends_an_episode_whose_last_calls_still_count(tokenizer):
    task = tasks(1)[0]
    prompt = prompt_ids(tokenizer, task)
    model = ScriptedModel(tokenizer, [prompt], [reference_script(task)])
    episode = episode_of(task, max_steps=2)
    (transcript,) = run_episodes(
        [prompt], [episode], model, budget=Budget(1000), codec=ChatCodec(tokenizer, [model.end])
    )
    assert transcript.end == "step budget" and transcript.turns == 2
    assert episode.score().reward == 1.0  # both calls ran; the answer turn was not needed
    assert transcript.completion_ids[-1] == model.end  # the last turn's results are not shown


def test_one_turn_rows_and_episodes_share_the_rounds(tokenizer):
    first, second = tasks(2, seed=3)
    prompts = [prompt_ids(tokenizer, first), tokenizer("plain question", add_special_tokens=False)["input_ids"],
               prompt_ids(tokenizer, second)]  # fmt: skip
    scripts = [reference_script(first), ["a plain answer"], reference_script(second)]
    model = ScriptedModel(tokenizer, prompts, scripts)
    episodes = [episode_of(first), None, episode_of(second)]
    transcripts = run_episodes(prompts, episodes, model, budget=Budget(1000), codec=ChatCodec(tokenizer, [model.end]))
    assert [t.turns for t in transcripts] == [3, 1, 3]
    assert transcripts[1].end == "answered" and all(transcripts[1].tool_mask)
    assert model.calls == [3, 2, 2]  # one round per turn, only open episodes sampled


def test_lockstep_keeps_an_idle_process_sampling_until_every_process_is_done(tokenizer):
    prompt = tokenizer("plain question", add_special_tokens=False)["input_ids"]
    model = ScriptedModel(tokenizer, [prompt], [["done"]])
    rounds = iter([True, True, True, False])  # another process is still playing for three rounds
    transcripts = run_episodes(
        [prompt], [None], model, budget=Budget(100), codec=ChatCodec(tokenizer, [model.end]),
        lockstep=lambda open_here: next(rounds),
    )  # fmt: skip
    assert model.calls == [1, 1, 1]  # its own turn, then two idle rounds of one token
    only_turn = tokenizer("done", add_special_tokens=False)["input_ids"] + [model.end]
    assert transcripts[0].completion_ids == only_turn  # the idle rounds' samples are dropped


def test_samplers_without_log_probabilities_give_none(tokenizer):
    prompt = tokenizer("q", add_special_tokens=False)["input_ids"]
    model = ScriptedModel(tokenizer, [prompt], [["x"]])

    def sample(sequences, max_tokens):
        return model(sequences, max_tokens)[0], None

    (transcript,) = run_episodes([prompt], [None], sample, budget=Budget(10), codec=ChatCodec(tokenizer, [model.end]))
    assert transcript.logprobs is None


def test_budgets_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        Budget(0)
    with pytest.raises(ValueError, match="positive"):
        Budget(10, turn_tokens=0)


class ScriptedGenerator:
    """A Generator answering each conversation with its task's next reference step."""

    def __init__(self, by_request: dict[str, list[str]]):
        self.by_request, self.seen = by_request, []

    def generate(self, messages, sampling=Sampling()):
        self.seen.append(sampling)
        request = next(m["content"] for m in messages if m["role"] == "user")
        turn = sum(m["role"] == "tool" for m in messages)
        return [self.by_request[request][turn]]

    async def agenerate(self, messages, sampling=Sampling()):
        return self.generate(messages, sampling)


def test_the_message_loop_plays_episodes_through_any_generator():
    from cascade_rl.llm.episodes import converse

    chosen = tasks(3, seed=5)
    generator = ScriptedGenerator({t.request: reference_script(t) for t in chosen})
    episodes = [episode_of(t) for t in chosen]
    converse(generator, episodes, Sampling(n=4, max_tokens=64))
    assert [e.end for e in episodes] == ["answered"] * 3
    assert [e.score().reward for e in episodes] == [1.0] * 3
    assert {s.n for s in generator.seen} == {1} and {s.max_tokens for s in generator.seen} == {64}
