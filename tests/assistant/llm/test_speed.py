"""The memory-bandwidth ceiling of generation (assistant/llm/speed.py): bytes a token reads, bandwidth."""

from __future__ import annotations

import numpy as np
from gguf import GGUFWriter

from assistant.llm.speed import bytes_per_token, read_bandwidth


def _gguf(path, tensors: dict[str, int]) -> None:
    writer = GGUFWriter(str(path), "llama")
    for name, n in tensors.items():
        writer.add_tensor(name, np.zeros(n, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_separate_output_head_leaves_the_embedding_table_out(tmp_path):
    # a step reads one row of token_embd, and the whole of every other tensor
    _gguf(tmp_path / "m.gguf", {"token_embd.weight": 1000, "blk.0.attn_q.weight": 300, "output.weight": 500})
    assert bytes_per_token(tmp_path / "m.gguf") == (300 + 500) * 4


def test_a_tied_head_reads_the_embedding_table_whole(tmp_path):
    _gguf(tmp_path / "m.gguf", {"token_embd.weight": 1000, "blk.0.attn_q.weight": 300})
    assert bytes_per_token(tmp_path / "m.gguf") == (1000 + 300) * 4


def test_read_bandwidth_is_bytes_per_second_for_one_and_two_threads():
    one, two = read_bandwidth(1, mib=16, reps=2), read_bandwidth(2, mib=16, reps=2)
    assert one > 2**20 and two > 2**20  # far above a MiB/s on any machine; no timing asserted beyond that
