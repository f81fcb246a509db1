"""A tiny llama-architecture GGUF model for the real-server tests, made here with the `gguf` package:
the vocabulary of a vocab-only GGUF that llama-cpp-python's sdist ships
(`vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf`) plus small random weights. No hub download; the
text it writes is gibberish, but the server, its chat template and the wire are real."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np

VOCAB = "vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf"
# A plain template (Jinja, as the server renders it) so the chat-template path is exercised.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def vocab_from_sdist(sdist: Path, dest: Path) -> Path:
    """Extract the vocab-only GGUF from a llama-cpp-python sdist (.tar.gz)."""
    with tarfile.open(sdist) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith(VOCAB))
        src = tf.extractfile(member)
        assert src is not None
        dest.write_bytes(src.read())
    return dest


def write_tiny_model(vocab_gguf: Path, out: Path, *, n_embd: int = 64, n_layer: int = 2, seed: int = 0) -> Path:
    import gguf

    reader = gguf.GGUFReader(vocab_gguf)
    w = gguf.GGUFWriter(out, "llama")
    n_head, n_ff, ctx = 4, 128, 512
    w.add_name("evalsweep-tiny")
    w.add_context_length(ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer.") or name == "tokenizer.chat_template":
            continue
        vtype = field.types[0]
        value = field.contents()
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, value, vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(name, value, vtype)
    w.add_chat_template(CHAT_TEMPLATE)
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    w.add_vocab_size(n_vocab)
    rng = np.random.default_rng(seed)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    ones = np.ones(n_embd, dtype=np.float32)
    w.add_tensor("token_embd.weight", rand(n_vocab, n_embd))
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{t}.weight", rand(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(n_embd, n_ff))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", rand(n_vocab, n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
