"""The one on-policy routine (issue 43): GRPO and distillation describe their objective as the same
StepSettings, and the backend builds one configuration from either."""

from cascade_rl.recipe import parse_recipe
from cascade_rl.train.distill import step_settings as distill_settings
from cascade_rl.train.grpo import step_settings as grpo_settings
from cascade_rl.train.on_policy import StepSettings

SHARED = {"data": "x.jsonl", "rollouts_per_prompt": 4, "prompts_per_batch": 2, "temperature": 0.8, "top_p": 1.0,
          "learning_rate": 1e-3}  # fmt: skip


def stages():
    grpo = {"kind": "grpo", "name": "g", "curriculum": [{"max_response_length": 64, "max_steps": 3}], **SHARED}
    mopd = {"kind": "distill", "name": "d", "teachers": {"math": "t"}, "max_response_length": 64, "max_steps": 3}
    recipe = parse_recipe({"name": "r", "model": {"path": "m"}, "stages": [grpo, {**mopd, **SHARED}]})
    return recipe.runtime, recipe.stages


def test_grpo_and_distillation_share_one_objective_description():
    runtime, (grpo, mopd) = stages()
    a, b = grpo_settings(grpo, grpo.curriculum[0], runtime), distill_settings(mopd)
    assert isinstance(a, StepSettings) and isinstance(b, StepSettings)
    differ = {name for name in StepSettings.__dataclass_fields__ if getattr(a, name) != getattr(b, name)}
    assert differ == {"importance_sampling"}  # the mismatch band: distillation's own
    assert a.importance_sampling == ("off", None, 3.0) and b.importance_sampling == ("token_mask", 0.5, 2.0)
    assert (a.per_device_batch_size, a.accumulation) == (8, 1) and a.token_loss and a.kl_coef == 0.0


def test_the_backend_config_of_a_distill_stage_comes_from_its_own_settings(tmp_path):
    from cascade_rl.train.distill import distill_config

    runtime, (_, mopd) = stages()
    config = distill_config(mopd, runtime, tmp_path, 0)
    assert (config.max_completion_length, config.max_steps, config.num_generations) == (64, 3, 4)
    assert config.vllm_importance_sampling_mode == "token_mask" and config.mask_truncated_completions is False
