"""Model loads from several threads at once (llm/pretrained.py): transformers' load-time patches
stay inside each load, so a model with tied embeddings loaded afterwards still has its head."""

import threading

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from cascade_rl.llm.pretrained import load_pretrained
from cascade_rl.rewards.preference import load_reward_model


def at_once(work, threads=4):
    barrier = threading.Barrier(threads)
    results = []

    def run():
        barrier.wait()
        results.append(work())

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results


def test_loads_in_four_threads_at_once_leave_weight_tying_on(tiny_checkpoint):
    original = PreTrainedModel.tie_weights
    models = at_once(lambda: [load_pretrained(AutoModelForCausalLM, tiny_checkpoint, dtype=torch.float32)
                              for _ in range(3)])  # fmt: skip
    assert PreTrainedModel.tie_weights is original
    later = AutoModelForCausalLM.from_pretrained(tiny_checkpoint, dtype=torch.float32)
    for model in [later, *(m for group in models for m in group)]:
        assert model.lm_head.weight.device.type == "cpu"
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_scorer_threads_asking_for_the_reward_model_at_once_build_it_once(tiny_checkpoint):
    original = PreTrainedModel.tie_weights
    models = at_once(lambda: load_reward_model(str(tiny_checkpoint), "cpu"))
    assert len({id(model) for model in models}) == 1
    assert PreTrainedModel.tie_weights is original
    later = AutoModelForCausalLM.from_pretrained(tiny_checkpoint, dtype=torch.float32)
    assert later.lm_head.weight.device.type == "cpu"
