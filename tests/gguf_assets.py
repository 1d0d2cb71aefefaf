"""A GGUF file the tests write themselves: a tiny random Llama with a byte-level BPE tokenizer and
a chat template, laid out as llama.cpp's converter writes one (tensor names, query/key rows
permuted for its rotary layout, matrices quantised to Q8_0 or Q4_1), so `cascade model import`
is tested on a real GGUF without the 98 MB SmolLM2 file."""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CORPUS = [f"what is {a} plus {b}? the answer is {a + b}." for a in range(20) for b in range(20)]


def tiny_tokenizer():
    """A byte-level BPE with ChatML's special tokens (ids 0-2 like SmolLM2's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=384,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    raw.train_from_iterator(CORPUS, trainer)
    return raw


def tiny_llama(vocab: int, *, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    return LlamaForCausalLM(config).eval()


def _permute(weights, heads: int):
    """llama.cpp's row order for rotary query / key projections (transformers undoes it)."""
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


GGUF_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def write_gguf(path: Path, *, quantization: str = "Q8_0", architecture: str = "llama", seed: int = 0):
    """Write the GGUF file; returns the model it holds (float32, before quantisation)."""
    import gguf
    import numpy as np

    tokenizer = tiny_tokenizer()
    model = tiny_llama(tokenizer.get_vocab_size(), seed=seed)
    config = model.config
    vocab = json.loads(tokenizer.to_str())["model"]
    tokens = [token for token, _ in sorted(vocab["vocab"].items(), key=lambda item: item[1])]
    merges = [" ".join(m) if isinstance(m, list) else m for m in vocab["merges"]]
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny-llama")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i < 3 else gguf.TokenType.NORMAL for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_chat_template(CHAT_TEMPLATE)
    qtype = getattr(gguf.GGMLQuantizationType, quantization)
    for name, tensor in model.state_dict().items():
        array = tensor.numpy().astype(np.float32)
        if name == "model.embed_tokens.weight":
            target = "token_embd.weight"
        elif name == "lm_head.weight":
            target = "output.weight"
        elif name == "model.norm.weight":
            target = "output_norm.weight"
        else:
            _, _, layer, *rest = name.split(".")
            module = ".".join(rest[:-1])
            if module == "self_attn.q_proj":
                array = _permute(array, config.num_attention_heads)
            elif module == "self_attn.k_proj":
                array = _permute(array, config.num_key_value_heads)
            target = f"blk.{layer}.{GGUF_NAMES[module]}.weight"
        if array.ndim == 2 and quantization != "F32":
            writer.add_tensor(target, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(target, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model
