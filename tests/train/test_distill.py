"""Multi-domain on-policy distillation as a stage (issue 12), on TRL's real trainer with tiny models:
the per-token advantage and the loss against a hand computation, routing by domain to local and
served teachers, the vLLM mismatch weight, teachers named by stage, bad input named before any
compute."""

import json
import math

import pytest
import torch
from datasets import Dataset
from teacher_server import health, served_teacher
from tiny_assets import build_checkpoint
from transformers import AutoModelForCausalLM, AutoTokenizer

from cascade_rl.recipe import RecipeError, parse_recipe
from cascade_rl.train.cascade import Cascade
from cascade_rl.train.distill import DomainModeSchedule, TeacherAdvantages, build_distill_data, distill_config
from cascade_rl.train.teachers import TeacherSpec, check_teachers, resolve_teachers
from cascade_rl.train.trl_backend import OnPolicyTrainer

ROWS = [{"prompt": f"what is {a} plus {a + 1}?", "domain": "alpha" if a % 2 else "beta"} for a in range(8)]


@pytest.fixture(scope="module")
def teacher_a(tmp_path_factory):
    return build_checkpoint(tmp_path_factory.mktemp("teacher-a") / "model", seed=1)


@pytest.fixture(scope="module")
def teacher_b(tmp_path_factory):
    """A wider teacher: only the vocabulary has to match the student's."""
    return build_checkpoint(tmp_path_factory.mktemp("teacher-b") / "model", hidden=48, seed=2)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "prompts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


def distill_stage(data, teachers, **overrides):
    stage = {
        "kind": "distill",
        "name": "mopd",
        "data": str(data),
        "teachers": {domain: str(t) for domain, t in teachers.items()},
        "thinking": {"alpha": "think", "beta": "no_think"},
        "rollouts_per_prompt": 2,
        "prompts_per_batch": 4,
        "max_response_length": 6,
        "max_steps": 2,
        "learning_rate": 1e-3,
    }
    return {**stage, **overrides}


def make_trainer(student, stage_dict, tmp_path, teachers, trainer_class=OnPolicyTrainer, **runtime):
    recipe = parse_recipe({"name": "t", "model": {"path": str(student)}, "runtime": runtime, "stages": [stage_dict]})
    stage = recipe.stages[0]
    data = build_distill_data(stage, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(student)
    return trainer_class(
        model=str(student),
        args=distill_config(stage, recipe.runtime, tmp_path / "trainer", 0),
        train_dataset=Dataset.from_list(data.rows),
        processing_class=tokenizer,
        schedule=DomainModeSchedule(data.modes, prompts_per_batch=stage.prompts_per_batch, seed=0),
        row_of=lambda prompt, mode: prompt,
        steps=stage.max_steps,
        objective=TeacherAdvantages(teachers),
    )


def local(domain, path):
    return TeacherSpec(domain, str(path), str(path))


def drawn_step(trainer):
    """The first step's rows, drawn through the sampler exactly as TRL's data loader reads them."""
    sampler = iter(trainer._get_train_sampler())
    count = trainer.schedule.batch * trainer.num_generations
    return [trainer.train_dataset[next(sampler)] for _ in range(count)]


def sequence(output, i):
    """Row ``i``'s prompt ids (padding removed) and completion ids."""
    prompt = output["prompt_ids"][i][output["prompt_mask"][i].bool()]
    completion = output["completion_ids"][i][: int(output["completion_mask"][i].sum())]
    return prompt, completion


def hand_logps(model, prompt, completion, temperature):
    """log pi(completion_t | prompt, completion_<t) from one unpadded forward pass."""
    ids = torch.cat([prompt, completion])[None]
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, completion[:, None]).squeeze(-1)


def load(path):
    return AutoModelForCausalLM.from_pretrained(path).eval()


def test_per_token_advantage_is_teacher_minus_student_log_prob_routed_by_domain(
    tiny_checkpoint, teacher_a, teacher_b, data_file, tmp_path
):
    stage = distill_stage(data_file, {"alpha": teacher_a, "beta": teacher_b})
    teachers = {"alpha": local("alpha", teacher_a), "beta": local("beta", teacher_b)}
    trainer = make_trainer(tiny_checkpoint, stage, tmp_path, teachers)
    rows = drawn_step(trainer)
    output = trainer._generate_and_score_completions(rows)
    student, models = load(tiny_checkpoint), {"alpha": load(teacher_a), "beta": load(teacher_b)}
    assert {row["_domain"] for row in rows} == {"alpha", "beta"}
    for i, row in enumerate(rows):
        prompt, completion = sequence(output, i)
        own = hand_logps(student, prompt, completion, trainer.temperature)
        expected = hand_logps(models[row["_domain"]], prompt, completion, trainer.temperature) - own
        advantage = output["advantages"][i]
        torch.testing.assert_close(advantage[: len(completion)], expected, rtol=1e-4, atol=1e-4)
        assert torch.all(advantage[len(completion) :] == 0)
        other = "beta" if row["_domain"] == "alpha" else "alpha"
        wrong = hand_logps(models[other], prompt, completion, trainer.temperature) - own
        assert (advantage[: len(completion)] - wrong).abs().max() > 1e-2  # scored by its own teacher only


def test_loss_is_the_token_level_policy_gradient_with_the_per_token_advantage(
    tiny_checkpoint, teacher_a, teacher_b, data_file, tmp_path
):
    """gradient = -(1/N) sum_t a_t grad log pi(y_t) over every token of the step; value = the
    mean reverse KL estimate (ratio exactly 1, no gradient through a_t)."""
    stage = distill_stage(data_file, {"alpha": teacher_a, "beta": teacher_b})
    teachers = {"alpha": local("alpha", teacher_a), "beta": local("beta", teacher_b)}
    trainer = make_trainer(tiny_checkpoint, stage, tmp_path, teachers)
    output = trainer._generate_and_score_completions(drawn_step(trainer))
    model, mask, advantages = trainer.model, output["completion_mask"], output["advantages"]
    model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    model.zero_grad()
    loss = trainer._compute_loss(model, output)
    loss.backward()
    trl_grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

    model.zero_grad()
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)
    attention = torch.cat([output["prompt_mask"], mask], 1)
    width = output["completion_ids"].size(1)
    logits = model(input_ids=ids, attention_mask=attention).logits[:, -width - 1 : -1].float() / trainer.temperature
    logps = torch.log_softmax(logits, -1).gather(-1, output["completion_ids"][..., None]).squeeze(-1)
    (-(advantages * logps * mask).sum() / mask.sum()).backward()
    hand_grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

    assert loss.item() == pytest.approx(-(advantages * mask).sum().item() / mask.sum().item(), abs=1e-6)
    assert len(trl_grads) == len(hand_grads)
    for a, b in zip(trl_grads, hand_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_served_teacher_scores_only_its_domain_and_agrees_with_the_local_checkpoint(
    tiny_checkpoint, teacher_a, teacher_b, data_file, tmp_path
):
    with served_teacher(teacher_a, name="alpha-teacher", log=tmp_path / "server.log") as root:
        url = f"{root}/v1#alpha-teacher"
        stage = distill_stage(data_file, {"alpha": url, "beta": teacher_b})
        check_teachers(
            parse_recipe({"name": "t", "model": {"path": "x"}, "stages": [stage]}).stages[0],
            {"alpha": TeacherSpec("alpha", url, url)},
            tiny_checkpoint,
            wait_s=30,
        )
        trainer = make_trainer(
            tiny_checkpoint,
            stage,
            tmp_path,
            {"alpha": TeacherSpec("alpha", url, url), "beta": local("beta", teacher_b)},
        )
        rows = drawn_step(trainer)
        before = health(root)["sequences"]
        output = trainer._generate_and_score_completions(rows)
        sent = health(root)["sequences"] - before
    student, teacher = load(tiny_checkpoint), load(teacher_a)
    alpha = [i for i, row in enumerate(rows) if row["_domain"] == "alpha"]
    assert 0 < len(alpha) < len(rows) and sent == len(alpha)  # one request per alpha rollout, none for beta
    for i in alpha:
        prompt, completion = sequence(output, i)
        expected = hand_logps(teacher, prompt, completion, 1.0) - hand_logps(student, prompt, completion, 1.0)
        torch.testing.assert_close(output["advantages"][i, : len(completion)], expected, rtol=1e-4, atol=1e-4)


RATIOS = (0.3, 0.55, 1.0, 1.9, 2.6)  # pi_train / pi_inference per token, cycled; the band is [0.5, 2]


class InferenceEngineRollouts(OnPolicyTrainer):
    """Rollouts as vLLM would return them: the tokens plus the engine's log-probabilities, here the
    trainer's own divided by a known ratio per token."""

    def _generate(self, prompts):
        self.use_vllm = False  # generate with transformers; the rest of the step runs the vLLM path
        result = list(super()._generate(prompts))
        self.use_vllm = True
        sampling = []
        for prompt, completion in zip(result[0], result[1]):
            own = hand_logps(self.model, torch.tensor(prompt), torch.tensor(completion), self.temperature)
            shift = torch.tensor([math.log(RATIOS[t % len(RATIOS)]) for t in range(len(completion))])
            sampling.append((own - shift).tolist())
        result[4] = sampling
        return tuple(result)


def test_mismatch_weight_zeroes_tokens_outside_the_band_and_keeps_the_ratio_inside(
    tiny_checkpoint, teacher_a, data_file, tmp_path
):
    stage = distill_stage(data_file, {"alpha": teacher_a, "beta": teacher_a}, max_response_length=8)
    teachers = {"alpha": local("alpha", teacher_a), "beta": local("beta", teacher_a)}
    trainer = make_trainer(tiny_checkpoint, stage, tmp_path, teachers, InferenceEngineRollouts)
    assert trainer.vllm_importance_sampling_mode == "token_mask"
    assert (trainer.vllm_importance_sampling_clip_min, trainer.vllm_importance_sampling_clip_max) == (0.5, 2.0)
    trainer.use_vllm = True
    output = trainer._generate_and_score_completions(drawn_step(trainer))
    weights, mask = output["importance_sampling_ratio"], output["completion_mask"]
    expected = torch.tensor([r if 0.5 <= r <= 2.0 else 0.0 for r in RATIOS])
    for i in range(len(mask)):
        length = int(mask[i].sum())
        wanted = expected.repeat(length // len(RATIOS) + 1)[:length]
        torch.testing.assert_close(weights[i, :length], wanted, rtol=1e-4, atol=1e-5)
    assert (weights * mask == 0).sum() > 0 and ((weights * mask) > 0).sum() > 0

    # the loss: gradient -(1/N) sum_t w_t a_t grad log pi(y_t), advantages against pi_train
    model = trainer.model
    model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    model.zero_grad()
    trainer._compute_loss(model, output).backward()
    trl_grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)
    width = output["completion_ids"].size(1)
    logits = model(input_ids=ids, attention_mask=torch.cat([output["prompt_mask"], mask], 1)).logits
    logps = torch.log_softmax(logits[:, -width - 1 : -1].float() / trainer.temperature, -1)
    logps = logps.gather(-1, output["completion_ids"][..., None]).squeeze(-1)
    (-(weights * output["advantages"] * logps * mask).sum() / mask.sum()).backward()
    for a, b in zip(trl_grads, [p.grad for p in model.parameters() if p.grad is not None]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------- stages and recipes
def rl_file(tmp_path):
    rows = [{"prompt": f"what is {a} plus {b}?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4), (2, 2), (5, 1)]]
    path = tmp_path / "rl.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def two_stage_recipe(student, tmp_path, data_file, teacher_b):
    grpo = {
        "kind": "grpo",
        "name": "toy",
        "data": str(rl_file(tmp_path)),
        "domain": "tiny_assets:contains_answer",
        "rollouts_per_prompt": 2,
        "prompts_per_batch": 2,
        "learning_rate": 1e-2,
        "curriculum": [{"max_response_length": 4, "max_steps": 1}],
    }
    stage = distill_stage(data_file, {"alpha": "toy", "beta": teacher_b})
    return parse_recipe(
        {"name": "t", "model": {"path": str(student)}, "runtime": {"reward_workers": 1}, "stages": [grpo, stage]}
    )


def test_a_teacher_named_by_stage_is_that_stages_checkpoint(tiny_checkpoint, teacher_b, data_file, tmp_path):
    recipe = two_stage_recipe(tiny_checkpoint, tmp_path, data_file, teacher_b)
    out = tmp_path / "run"
    Cascade(recipe, out, echo=lambda _: None).run()
    record = json.loads((out / "02-mopd" / "distill.json").read_text())
    assert record["teachers"]["alpha"]["source"] == str(out / "01-toy" / "model")
    assert record["teachers"]["alpha"]["stage_dir"] == str(out / "01-toy")
    assert record["teachers"]["beta"]["source"] == str(teacher_b)
    assert record["student_stage_dir"] == str(out / "01-toy")  # the student starts where the cascade is
    metrics = [json.loads(line) for line in (out / "02-mopd" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for key in ("distill/reverse_kl", "time/teacher"):
        assert all(key in m for m in metrics)
    assert any("distill/alpha/reverse_kl" in m and "response_length/alpha" in m for m in metrics)
    assert not any(key.startswith("reward") for m in metrics for key in m)
    assert json.loads((out / "02-mopd" / "stage.json").read_text())["status"] == "done"


def test_a_teacher_stage_that_has_not_run_is_named(tiny_checkpoint, teacher_b, data_file, tmp_path):
    recipe = two_stage_recipe(tiny_checkpoint, tmp_path, data_file, teacher_b)
    with pytest.raises(RecipeError, match=r"teachers\.alpha: stage 'toy' has not run in .*01-toy/stage.json"):
        resolve_teachers(recipe.stages[1], Cascade(recipe, tmp_path / "empty-run").stage_dirs)


@pytest.mark.parametrize(
    "stages, message",
    [
        (["mopd", "toy"], r"teachers\.alpha: 'toy' is not an earlier policy stage"),
        (["rm", "mopd"], r"teachers\.alpha: 'rm' is not an earlier policy stage"),
    ],
)
def test_recipe_refuses_a_teacher_stage_that_is_later_or_not_a_policy(data_file, tmp_path, stages, message):
    by_name = {
        "toy": {"kind": "grpo", "name": "toy", "data": "x.jsonl", "curriculum": [{"max_response_length": 4}]},
        "rm": {"kind": "reward_model", "name": "rm", "data": "x.jsonl"},
        "mopd": distill_stage(data_file, {"alpha": stages[0] if stages[0] != "mopd" else "toy", "beta": "toy"}),
    }
    with pytest.raises(RecipeError, match=message):
        parse_recipe({"name": "t", "model": {"path": "x"}, "stages": [by_name[name] for name in stages]})


def test_distill_recipe_fields_are_validated(data_file):
    def parse(teachers, **overrides):
        stage = distill_stage(data_file, teachers, **overrides)
        return parse_recipe({"name": "t", "model": {"path": "x"}, "stages": [stage]})

    with pytest.raises(RecipeError, match=r"stages\[0\] \(mopd\)\.teachers"):
        parse({})
    with pytest.raises(RecipeError, match=r"no mode for \['gamma'\]"):
        parse({"alpha": "a", "beta": "b", "gamma": "c"})
    with pytest.raises(RecipeError, match="mismatch_band"):
        parse({"alpha": "a", "beta": "b"}, mismatch_band=[2.0, 0.5])
    stage = parse({"alpha": "a", "beta": "b"}, thinking="half").stages[0]
    assert stage.mode_of("alpha") == "half" and stage.mismatch_band == (0.5, 2.0) and stage.rollouts_per_prompt == 2


def test_half_mode_puts_every_prompt_in_both_modes(tiny_checkpoint, data_file, teacher_a):
    stage = parse_recipe(
        {
            "name": "t",
            "model": {"path": "x"},
            "stages": [distill_stage(data_file, {"alpha": teacher_a, "beta": teacher_a}, thinking="half")],
        }
    ).stages[0]
    data = build_distill_data(stage, seed=0)
    assert len(data.rows) == 2 * len(ROWS) and data.domain_counts() == {"alpha": 8, "beta": 8}
    schedule = DomainModeSchedule(data.modes, prompts_per_batch=4, seed=0)
    draw = schedule.draw()
    assert list(draw.modes) == [data.rows[p]["_mode"] for p in draw.prompts]


def test_a_sources_domain_routes_its_rows_to_that_domains_teacher(teacher_a, tmp_path):
    """As in a GRPO stage, a data source's ``domain`` is its rows' domain, over their own column:
    released chat prompts carry none, and their source names the teacher's domain."""
    chat, tagged = tmp_path / "chat.jsonl", tmp_path / "tagged.jsonl"
    chat.write_text("".join(json.dumps({"prompt": f"say hi {n}"}) + "\n" for n in range(3)))
    tagged.write_text(json.dumps({"prompt": "what is 1 plus 2?", "domain": "ifeval"}) + "\n")
    sources = [{"path": str(chat), "domain": "preference"}, {"path": str(tagged), "domain": "math"}]
    stage = {**distill_stage(chat, {"preference": teacher_a, "math": teacher_a}, thinking="think"), "data": sources}
    data = build_distill_data(parse_recipe({"name": "t", "model": {"path": "x"}, "stages": [stage]}).stages[0], seed=0)
    assert data.domain_counts() == {"math": 1, "preference": 3}
    stage["teachers"] = {"math": str(teacher_a)}
    with pytest.raises(RecipeError, match=r"chat\.jsonl: domain 'preference' has no teacher"):
        build_distill_data(parse_recipe({"name": "t", "model": {"path": "x"}, "stages": [stage]}).stages[0], seed=0)


# ----------------------------------------------------------------------------- bad input
def test_a_row_whose_domain_has_no_teacher_is_named_before_any_compute(tiny_checkpoint, teacher_a, tmp_path):
    path = tmp_path / "prompts.jsonl"
    rows = [ROWS[1], {"prompt": "hello", "domain": "alpha"}, {"prompt": "what is 1 plus 2?", "domain": "swe"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stage = distill_stage(path, {"alpha": teacher_a}, thinking="think")
    recipe = parse_recipe({"name": "t", "model": {"path": str(tiny_checkpoint)}, "stages": [stage]})
    with pytest.raises(RecipeError) as error:
        Cascade(recipe, tmp_path / "run", echo=lambda _: None).run()
    message = str(error.value)
    assert "\n" not in message and "prompts.jsonl:3" in message and "'swe' has no teacher" in message
    assert not (tmp_path / "run" / "01-mopd").exists()  # refused before the stage opened


def other_tokenizer_checkpoint(base, folder):
    """The same model weights with a tokenizer that knows one token more."""
    import shutil

    shutil.copytree(base, folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_tokens(["<extra-token>"])
    tokenizer.save_pretrained(folder)
    return folder


def test_a_teacher_with_another_tokenizer_is_named_before_any_compute(tiny_checkpoint, teacher_a, data_file, tmp_path):
    other = other_tokenizer_checkpoint(teacher_a, tmp_path / "other")
    stage = distill_stage(data_file, {"alpha": teacher_a, "beta": other})
    recipe = parse_recipe({"name": "t", "model": {"path": str(tiny_checkpoint)}, "stages": [stage]})
    with pytest.raises(RecipeError) as error:
        Cascade(recipe, tmp_path / "run", echo=lambda _: None).run()
    message = str(error.value)
    assert "\n" not in message and "teachers.beta" in message and "tokenizer differs from the student's" in message
    assert not (tmp_path / "run" / "01-mopd").exists()


def test_a_served_teacher_with_another_tokenizer_is_named(tiny_checkpoint, teacher_a, data_file, tmp_path):
    student = other_tokenizer_checkpoint(tiny_checkpoint, tmp_path / "student")
    stage = parse_recipe(
        {"name": "t", "model": {"path": "x"}, "stages": [distill_stage(data_file, {"alpha": "a", "beta": "b"})]}
    ).stages[0]
    with served_teacher(teacher_a) as root:
        spec = TeacherSpec("alpha", f"{root}/v1", f"{root}/v1")
        with pytest.raises(RecipeError, match=r"teachers\.alpha: .*tokenizer differs from the student's"):
            check_teachers(stage, {"alpha": spec}, student, wait_s=30)
    with pytest.raises(RecipeError, match=r"teachers\.alpha: no teacher server answers at http://127.0.0.1:9"):
        check_teachers(
            stage, {"alpha": TeacherSpec("alpha", "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1")}, student, 1
        )


# ----------------------------------------------------------------------------- the shipped recipe
def test_tiny_mopd_is_the_embedded_default_then_mopd_taught_by_its_own_stages():
    from cascade_rl.recipe import DistillStage, load_recipe

    tiny, mopd = load_recipe("recipes/tiny.yaml"), load_recipe("recipes/tiny-mopd.yaml")
    assert [s.name for s in mopd.stages] == [s.name for s in tiny.stages] + ["mopd"]
    assert mopd.model_dump(exclude={"stages"}) == tiny.model_dump(exclude={"stages"})  # same run: runs/tiny
    assert [s.model_dump() for s in mopd.stages[:-1]] == [s.model_dump() for s in tiny.stages]
    stage = mopd.stages[-1]
    assert isinstance(stage, DistillStage) and [s.name for s in mopd.stages].index("swe") == len(mopd.stages) - 2
    assert stage.teachers == {"preference": "rlhf", "ifeval": "ifrl", "math": "math", "code": "code"}


def test_extends_names_a_missing_or_circular_base(tmp_path):
    from cascade_rl.recipe import load_recipe

    (tmp_path / "a.yaml").write_text("extends: b.yaml\nname: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nname: b\n")
    (tmp_path / "c.yaml").write_text("extends: missing.yaml\nname: c\n")
    with pytest.raises(RecipeError, match=r"a.yaml: extends .*b.yaml, which extends it back|extends .*a.yaml"):
        load_recipe(tmp_path / "a.yaml")
    with pytest.raises(RecipeError, match=r"recipe file not found: .*missing.yaml \(extended by .*c.yaml\)"):
        load_recipe(tmp_path / "c.yaml")


def test_mopd_plays_episodes_and_the_teacher_advantage_is_zero_on_tool_results(tmp_path):
    """A workplace row in a distill stage is an episode (its environment runs on the row's fields):
    the student's completion holds several turns and the tool results between them, and only the
    model's own tokens get the teacher's advantage."""
    from episode_assets import DELETE, build_caller, caller_rows

    from cascade_rl.train.episodes import EpisodeSettings

    student = build_caller(tmp_path / "student")
    teacher = build_caller(tmp_path / "teacher", delete_bias=2.0)  # prefers the deleting call
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in caller_rows(4)))
    stage = distill_stage(data, {"workplace": teacher}, thinking="no_think", max_response_length=1500,
                          max_turns=2, temperature=1.0)  # fmt: skip
    recipe = parse_recipe({"name": "t", "model": {"path": str(student)}, "stages": [stage]})
    episodes = EpisodeSettings.of(recipe.stages[0], ["workplace"])
    trainer = make_trainer(student, stage, tmp_path, {"workplace": local("workplace", teacher)})
    trainer.episodes = episodes
    output = trainer._generate_and_score_completions(drawn_step(trainer))
    tool_mask, mask, advantages = output["tool_mask"], output["completion_mask"], output["advantages"]
    tokenizer = AutoTokenizer.from_pretrained(student)
    delete = tokenizer.convert_tokens_to_ids(DELETE)
    for row in range(mask.size(0)):
        length = int(mask[row].sum())
        turns = [i for i in range(length) if tool_mask[row, i]]
        assert len(turns) == 8 and length > 8  # two 4-token turns, a tool result between them
        assert torch.all(advantages[row, :length][tool_mask[row, :length] == 0] == 0)
        ids = output["completion_ids"][row].tolist()
        for i in turns:  # the teacher's preference shows where the call was chosen, and only there
            expected = math.log(1 / (1 + math.exp(-2.0))) - math.log(0.5) if ids[i] == delete else None
            if expected is not None:
                assert advantages[row, i].item() == pytest.approx(expected, abs=1e-3)
