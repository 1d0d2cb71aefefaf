"""SFT stages on TRL's SFTTrainer (SPEC section 3)."""

import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from cascade_rl.recipe import parse_recipe
from cascade_rl.train.context import StageContext
from cascade_rl.train.sft import run_sft_stage


def sft_rows():
    rows = []
    for a in range(6):
        for b in range(4):
            question = f"what is {a} plus {b}?"
            rows.append(
                {
                    "messages": [
                        {"role": "user", "content": question, "mode": "think"},
                        {"role": "assistant", "content": f"<think>{a}+{b}={a + b}</think>{a + b}"},
                    ]
                }
            )
            rows.append(
                {
                    "messages": [
                        {"role": "user", "content": question, "mode": "no_think"},
                        {"role": "assistant", "content": f"{a + b}"},
                    ]
                }
            )
    return rows


def test_two_substages_train_from_each_other_and_drop_overlong_samples(tiny_checkpoint, tmp_path, capfd):
    data = tmp_path / "sft.jsonl"
    long_row = {"messages": [{"role": "user", "content": "x " * 400}, {"role": "assistant", "content": "y"}]}
    tool_row = {
        "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "user", "content": "add 1 and 2"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}],
            },
        ],
    }
    data.write_text("\n".join(json.dumps(r) for r in sft_rows() + [long_row, tool_row]) + "\n{broken\n")
    recipe = parse_recipe(
        {
            "name": "t",
            "model": {"path": str(tiny_checkpoint)},
            "stages": [
                {
                    "kind": "sft",
                    "substages": [
                        {
                            "name": "s1",
                            "data": str(data),
                            "max_length": 512,
                            "batch_size": 8,
                            "per_device_batch_size": 8,
                            "learning_rate": 3e-3,
                            "max_steps": 4,
                        },
                        {
                            "name": "s2",
                            "data": [{"path": str(data), "upsample": 2}],
                            "max_length": 512,
                            "batch_size": 8,
                            "per_device_batch_size": 8,
                            "learning_rate": 3e-3,
                            "max_steps": 3,
                        },
                    ],
                }
            ],
        }
    )
    stage_dir = tmp_path / "stage"
    model_dir = run_sft_stage(
        recipe.stages[0],
        StageContext.settle(policy=tiny_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0),
    )
    report = json.loads((stage_dir / "data_report.json").read_text())
    assert report["substage-1"]["rows"] == 49 and report["substage-2"]["rows"] == 98
    assert (
        "1 invalid JSON" in report["substage-1"]["data"]
        and "longer than max_length 512" in report["substage-1"]["data"]
    )
    metrics = [json.loads(line) for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 8)) and all("loss" in m for m in metrics)
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    assert "{'loss'" not in capfd.readouterr().err  # the bar shows the loss; no dict per step
    tuned = AutoModelForCausalLM.from_pretrained(model_dir)
    base = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    assert any(not torch.equal(a, b) for a, b in zip(tuned.parameters(), base.parameters()))
    assert (
        AutoTokenizer.from_pretrained(model_dir).chat_template
        == AutoTokenizer.from_pretrained(tiny_checkpoint).chat_template
    )


def test_assistant_only_loss_masks_the_prompt(tiny_checkpoint):
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    messages = sft_rows()[0]["messages"]
    out = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    masked = [t for t, m in zip(out["input_ids"], out["assistant_masks"]) if m]
    assert tokenizer.decode(masked) == "<think>0+0=0</think>0<|im_end|>\n"


def test_dense_and_fused_lm_heads_train_the_same_model(tiny_checkpoint, tmp_path):
    """runtime.lm_head reaches the trainer: the two heads give the same weights up to float
    rounding (bit-identical weights would mean the choice was ignored)."""
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in sft_rows()))
    weights = {}
    for head in ("fused", "dense"):
        recipe = parse_recipe(
            {
                "name": "t",
                "model": {"path": str(tiny_checkpoint)},
                "runtime": {"lm_head": head, "save_steps": None},
                "stages": [
                    {
                        "kind": "sft",
                        "substages": [
                            {"name": "s", "data": str(data), "max_length": 128, "epochs": 1, "learning_rate": 1e-3}
                            | {"batch_size": 8, "per_device_batch_size": 4}
                        ],
                    }
                ],
            }
        )
        model = run_sft_stage(
            recipe.stages[0],
            StageContext.settle(policy=tiny_checkpoint, stage_dir=tmp_path / head, runtime=recipe.runtime, seed=0),
        )
        weights[head] = list(AutoModelForCausalLM.from_pretrained(model).parameters())
    gaps = [(a - b).abs().max().item() for a, b in zip(weights["fused"], weights["dense"])]
    assert 0 < max(gaps) < 1e-3


def test_a_template_without_generation_markers_trains_on_the_answer_only(smollm2_tiny, tmp_path, monkeypatch):
    """SmolLM2's own template has no {% generation %} markers: each row becomes a prompt and a
    completion, and only the completion's tokens (the answer and the end of its turn) are targets."""
    from trl import SFTTrainer

    seen = []
    original = SFTTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        seen.append((inputs["input_ids"].clone(), inputs["labels"].clone()))
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(SFTTrainer, "compute_loss", spy)
    data = tmp_path / "sft.jsonl"
    row = {
        "messages": [
            {"role": "user", "content": "what is 2 plus 2?"},
            {"role": "assistant", "content": "4, of course."},
        ]
    }
    data.write_text((json.dumps(row) + "\n") * 4)
    sub = {"name": "s1", "data": str(data), "max_length": 256, "batch_size": 4, "per_device_batch_size": 4,
           "learning_rate": 1e-3, "max_steps": 1}  # fmt: skip
    recipe = parse_recipe(
        {"name": "t", "model": {"path": str(smollm2_tiny), "chat_template": "keep"},
         "stages": [{"kind": "sft", "substages": [sub]}]}
    )  # fmt: skip
    run_sft_stage(
        recipe.stages[0],
        StageContext.settle(policy=smollm2_tiny, stage_dir=tmp_path / "sft", runtime=recipe.runtime, seed=0),
    )
    tokenizer = AutoTokenizer.from_pretrained(smollm2_tiny)
    ids, labels = seen[0]
    assert tokenizer.decode(ids[0][labels[0] != -100]) == "4, of course.<|im_end|>\n"
    assert "what is 2 plus 2?" in tokenizer.decode(ids[0])


def tool_schema(name, *properties):
    parameters = {"type": "object", "properties": {key: {"type": "string"} for key in properties},
                  "required": list(properties)}  # fmt: skip
    return {"type": "function", "function": {"name": name, "description": f"{name}.", "parameters": parameters}}


def test_each_row_trains_on_its_own_tools_and_calls_as_written(tiny_checkpoint, tmp_path, monkeypatch):
    """Rows with different tools (and a call whose arguments are an object) train on exactly the
    text the chat template renders for each: no other row's property names as nulls (the union
    an Arrow table gives every row's nested objects)."""
    from trl import SFTTrainer

    seen = []
    original = SFTTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        seen.extend(ids[mask.bool()] for ids, mask in zip(inputs["input_ids"], inputs["attention_mask"]))
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(SFTTrainer, "compute_loss", spy)
    rows = [
        {"tools": [tool_schema("find_email", "name")],
         "messages": [{"role": "user", "content": "Find Ana.", "mode": "no_think"},
                      {"role": "assistant", "content": "", "tool_calls": [
                          {"type": "function", "function": {"name": "find_email", "arguments": {"name": "Ana"}}}]},
                      {"role": "tool", "name": "find_email", "content": "ana@x.org"},
                      {"role": "assistant", "content": "ana@x.org"}]},
        {"tools": [tool_schema("send_message", "to", "text"), tool_schema("get_time", "city")],
         "messages": [{"role": "user", "content": "Text Ben hi.", "mode": "no_think"},
                      {"role": "assistant", "content": "", "tool_calls": [
                          {"type": "function", "function": {"name": "send_message",
                                                            "arguments": '{"to": "Ben", "text": "hi"}'}}]}]},
    ]  # fmt: skip
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sub = {"name": "s", "data": str(data), "max_length": 1024, "batch_size": 2, "per_device_batch_size": 2,
           "learning_rate": 1e-3, "max_steps": 1}  # fmt: skip
    recipe = parse_recipe({"name": "t", "model": {"path": str(tiny_checkpoint)},
                           "stages": [{"kind": "sft", "substages": [sub]}]})  # fmt: skip
    context = StageContext.settle(policy=tiny_checkpoint, stage_dir=tmp_path / "sft", runtime=recipe.runtime, seed=0)
    run_sft_stage(recipe.stages[0], context)
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    trained = sorted(tokenizer.decode(ids) for ids in seen)
    expected = sorted(
        tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False) for row in rows
    )
    assert trained == expected
    assert "null" not in "".join(trained) and '"arguments": {"name": "Ana"}' in trained[0] + trained[1]


def test_a_rejection_sampled_source_trains_on_the_answers_its_verifier_accepts(tmp_path):
    """RL prompts answered by the input model (a chain model that always writes "Sure, here it is"):
    the prompts whose constraint that answer meets give SFT rows, the others none."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "llm"))
    from llm_helpers import SURE, build_chain_model

    from cascade_rl.chat import IM_END

    words = ["Sure", ",", " here", " it", " is"]
    chain = {"\n": {words[0]: SURE}, **{a: {b: SURE} for a, b in zip(words, words[1:])}, words[-1]: {IM_END: SURE}}
    model = build_chain_model(tmp_path / "model", chain, tuple(w for w in words if len(w) > 1))
    prompts = tmp_path / "if.jsonl"
    rows = [
        {"prompt": f"Say something about {topic}.", "domain": "ifeval", "instruction_id_list": [rule], "kwargs": [{}]}
        for topic in ("the sea", "the sky", "a cat")
        for rule in ("change_case:english_lowercase", "punctuation:no_comma")  # fails / fails, the comma
    ] + [{"prompt": "Answer briefly.", "domain": "ifeval", "instruction_id_list": ["detectable_format:title"],
          "kwargs": [{}]}, {"prompt": "Write a short reply.", "domain": "ifeval",
          "instruction_id_list": ["length_constraints:number_words"],
          "kwargs": [{"relation": "less than", "num_words": 10}]}]  # fmt: skip
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    source = {"path": str(prompts), "rejection": {"k": 2, "max_tokens": 12, "temperature": 0.0}}
    sub = {"name": "s1", "data": [source], "max_length": 256, "batch_size": 1, "per_device_batch_size": 1,
           "learning_rate": 1e-3, "max_steps": 1}  # fmt: skip
    recipe = parse_recipe({"name": "t", "model": {"path": str(model)}, "stages": [{"kind": "sft", "substages": [sub]}]})
    run_sft_stage(
        recipe.stages[0], StageContext.settle(policy=model, stage_dir=tmp_path / "sft", runtime=recipe.runtime, seed=0)
    )
    kept = [json.loads(line) for line in (tmp_path / "sft" / "substage-1" / "rejection-1.jsonl").open()]
    assert [row["messages"][0]["content"] for row in kept] == ["Write a short reply."]  # < 10 words: accepted
    assert kept[0]["messages"][-1]["content"] == "Sure, here it is" and kept[0]["reward"] == 1.0
    assert json.loads((tmp_path / "sft" / "substage-1" / "done").read_text())["rows"] == 1


def test_rejection_sampling_draws_with_the_source_s_top_k(tmp_path):
    """A chain model that starts "Sure" three times in four and "sure" once: the lowercase rule
    accepts only the second. Sampled freely, some of 4 samples start "sure"; with top-k 1 none does,
    so only the rows every answer passes (the word-count rule) are kept."""
    import math
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "llm"))
    from llm_helpers import SURE, build_chain_model

    from cascade_rl.chat import IM_END

    chain = {"\n": {"Sure": SURE + math.log(3.0), "sure": SURE}, "Sure": {" here": SURE}, "sure": {" here": SURE},
             " here": {IM_END: SURE}}  # fmt: skip
    model = build_chain_model(tmp_path / "model", chain, ("Sure", "sure", " here"))
    prompts = tmp_path / "if.jsonl"
    rules = ["change_case:english_lowercase"] * 6 + ["length_constraints:number_words"]
    prompts.write_text("".join(
        json.dumps({"prompt": f"Say something, {i}.", "domain": "ifeval", "instruction_id_list": [rule],
                    "kwargs": [{"relation": "less than", "num_words": 10} if "number" in rule else {}]}) + "\n"
        for i, rule in enumerate(rules)
    ))  # fmt: skip

    def kept_prompts(top_k: int | None) -> list[str]:
        rejection = {"k": 4, "max_tokens": 6, "temperature": 1.0, "top_p": 1.0, "top_k": top_k}
        sub = {"name": "s1", "data": [{"path": str(prompts), "rejection": rejection}], "max_length": 256,
               "batch_size": 1, "per_device_batch_size": 1, "learning_rate": 1e-3, "max_steps": 1}  # fmt: skip
        recipe = parse_recipe(
            {"name": "t", "model": {"path": str(model)}, "stages": [{"kind": "sft", "substages": [sub]}]}
        )
        stage_dir = tmp_path / f"sft-{top_k}"
        run_sft_stage(
            recipe.stages[0], StageContext.settle(policy=model, stage_dir=stage_dir, runtime=recipe.runtime, seed=0)
        )
        kept = [json.loads(line) for line in (stage_dir / "substage-1" / "rejection-1.jsonl").open()]
        return [row["messages"][0]["content"] for row in kept]

    assert len(kept_prompts(None)) > 1
    assert kept_prompts(1) == ["Say something, 6."]  # the word-count row alone


def tool_episode():
    tools = [tool_schema("find_email", "name"), tool_schema("send_message", "to", "text")]
    call = {"type": "function", "function": {"name": "find_email", "arguments": '{"name": "Ana"}'}}
    return {"tools": tools,
            "messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Find Ana.", "mode": "no_think"},
                         {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "name": "find_email", "content": "ana@x.org"},
                         {"role": "assistant", "content": "It is ana@x.org."}]}  # fmt: skip


def sft_on(model, row, tmp_path, monkeypatch):
    """One SFT step on ``row`` with the model's own template; each sample's text and, per run of
    target tokens, the text of those tokens."""
    from trl import SFTTrainer

    tokenizer, seen = AutoTokenizer.from_pretrained(model), []
    original = SFTTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        for ids, labels in zip(inputs["input_ids"], inputs["labels"]):
            target, runs = (labels != -100).tolist(), []
            for index, on in enumerate(target):
                if on and (index == 0 or not target[index - 1]):
                    runs.append([])
                if on:
                    runs[-1].append(ids[index].item())
            seen.append((tokenizer.decode(ids), [tokenizer.decode(run) for run in runs]))
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(SFTTrainer, "compute_loss", spy)
    data = tmp_path / "sft.jsonl"
    data.write_text(json.dumps(row) + "\n")
    sub = {"name": "s", "data": str(data), "max_length": 1024, "batch_size": 2, "per_device_batch_size": 2,
           "learning_rate": 1e-3, "max_steps": 1}  # fmt: skip
    recipe = parse_recipe({"name": "t", "model": {"path": str(model), "chat_template": "keep"},
                           "stages": [{"kind": "sft", "substages": [sub]}]})  # fmt: skip
    context = StageContext.settle(policy=model, stage_dir=tmp_path / "sft", runtime=recipe.runtime, seed=0)
    run_sft_stage(recipe.stages[0], context)
    return seen


def test_a_plain_template_trains_every_turn_of_a_tool_episode_with_its_tools_and_calls_shown(
    smollm2_tiny, tmp_path, monkeypatch
):
    """SmolLM2's template shows only each message's content and marks no assistant tokens: a tool
    episode is one sample whose targets are both assistant turns (nothing else), the call written
    as the <tool_call> text RL parses, the tools listed in the system message as RL prompts list
    them (neither dropped nor an empty target)."""
    from cascade_rl.chat import parse_tool_calls, with_tools

    row = tool_episode()
    [(text, targets)] = sft_on(smollm2_tiny, row, tmp_path, monkeypatch)
    assert len(targets) == 2 and targets[1] == "It is ana@x.org.<|im_end|>\n"
    assert targets[0].endswith("</tool_call><|im_end|>\n")
    assert parse_tool_calls(targets[0]) == [{"name": "find_email", "arguments": {"name": "Ana"}}]
    system = with_tools(row["messages"][:1], row["tools"])[0]["content"]
    assert text.startswith(f"<|im_start|>system\n{system}<|im_end|>")
    assert "<|im_start|>tool\nana@x.org<|im_end|>" in text  # the tool's result: read, not trained


def test_a_template_that_rewrites_earlier_turns_trains_each_turn_as_its_own_completion(
    smollm2_tiny, tmp_path, monkeypatch
):
    """A template that shows an earlier assistant turn differently once the conversation goes on
    (as Qwen3's drops past thinking) cannot be masked in one sample: each assistant turn is then
    the completion of its own sample, prompted by the conversation before it as the template
    renders it."""
    template = (smollm2_tiny / "chat_template.jinja").read_text()
    shown = "(message['content'] if loop.last or message['role'] != 'assistant' else '...')"
    rewriting = template.replace("message['content']", shown)
    assert rewriting != template
    import shutil

    model = shutil.copytree(smollm2_tiny, tmp_path / "rewriting")
    (model / "chat_template.jinja").write_text(rewriting)
    seen = sft_on(model, tool_episode(), tmp_path, monkeypatch)
    assert sorted(len(targets) for _, targets in seen) == [1, 1]
    assert sorted(targets[0] for _, targets in seen)[1] == "It is ana@x.org.<|im_end|>\n"


def sft_run(model, rows, folder, processes: int):
    """``cascade run`` of one SFT stage on ``rows`` in ``processes`` processes (torchrun, gloo);
    the trained weights."""
    import os
    import subprocess
    import sys

    import yaml
    from child_env import child_environment

    folder.mkdir(parents=True)
    data = folder / "sft.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sub = {"name": "s", "data": str(data), "max_length": 1024, "batch_size": 4, "per_device_batch_size": 2,
           "learning_rate": 1e-3, "max_steps": 2}  # fmt: skip
    recipe = {"name": "t", "seed": 0, "model": {"path": str(model), "chat_template": "keep"},
              "runtime": {"torch_threads": 1}, "stages": [{"kind": "sft", "substages": [sub]}]}  # fmt: skip
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    cli = ["-m", "cascade_rl.cli", "run", str(path), "--out", str(folder / "run")]
    if processes > 1:
        launcher = str(Path(sys.executable).with_name("torchrun"))
        cli = ["--nproc_per_node", str(processes), "--master_port", str(29300 + os.getpid() % 1000), *cli]
    else:
        launcher = sys.executable
    result = subprocess.run([launcher, *cli], capture_output=True, text=True, timeout=900, env=child_environment())
    assert result.returncode == 0, result.stderr[-4000:]
    return list(AutoModelForCausalLM.from_pretrained(folder / "run" / "01-sft" / "model").parameters())


def test_two_processes_train_every_turn_of_tool_episodes_as_one_process_does(smollm2_tiny, tmp_path):
    """The multi-turn path on a plain template (every assistant turn a target, tools and calls
    written in) under torchrun: each process tokenizes and masks the rows as one process does, so
    two processes of two rows reach one process's weights."""
    episode = tool_episode()
    rows = [episode, {**episode, "messages": episode["messages"][:2] + [{"role": "assistant", "content": "No."}]}] * 4
    one = sft_run(smollm2_tiny, rows, tmp_path / "one", 1)
    two = sft_run(smollm2_tiny, rows, tmp_path / "two", 2)
    start = list(AutoModelForCausalLM.from_pretrained(smollm2_tiny).parameters())
    assert any(not torch.equal(a, b) for a, b in zip(one, start))
    for a, b in zip(one, two):
        assert torch.allclose(a, b, atol=1e-5)
