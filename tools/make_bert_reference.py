"""Write utils/bert/minilm_reference.npz: transformers.BertModel's outputs on the packaged all-MiniLM-L6-v2.

    python -m tools.make_bert_reference

The TensorFlow lesson may not import torch, so it compares the course's Keras
BERT with these stored reference outputs; tests/test_bert.py checks that the
file still equals what transformers computes.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from utils.bert.weights import REFERENCE_FILE as OUT
TEXTS = ["The film is a quiet triumph.", "A dull, overlong mess that never finds its feet.", "Not bad at all!"]
PAIRS = ["Critics agreed.", "Nobody laughed.", "I would watch it again."]


def reference(folder: Path) -> dict[str, np.ndarray]:
    """Inputs and transformers.BertModel outputs for TEXTS / PAIRS (max_len 32)."""
    import torch
    import transformers

    from utils.bert.common import encode_texts
    from utils.bert.weights import load_tokenizer

    batch = encode_texts(load_tokenizer(folder), TEXTS, 32, pairs=PAIRS)
    model = transformers.BertModel.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(batch["token_ids"]), token_type_ids=torch.as_tensor(batch["segment_ids"]),
                    attention_mask=torch.as_tensor(batch["padding_mask"].astype(np.int64)))
    return {**batch, "last_hidden_state": out.last_hidden_state.numpy(), "pooler_output": out.pooler_output.numpy(),
            "transformers_version": np.array(transformers.__version__)}


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from utils.bert.weights import packaged_model_dir

    np.savez_compressed(OUT, **reference(packaged_model_dir()))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
