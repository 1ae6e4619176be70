"""Write memledger/recall/minilm_axes_<dim>.npy: the principal axes that `minilm:<dim>`
and `minilm-int8:<dim>` project their vectors on (docs/RECALL.md).

The axes come from the model alone: each of its 30,522 vocabulary tokens is encoded on
its own (`[CLS] token [SEP]`, the float NumPy encoder), the unit vectors are centred,
and their top `dim` right singular vectors (float64 SVD) are kept, each signed so that
its largest component is positive. No memory or query is involved, so the projection
cannot fit an evaluation set. The file is committed: a node must project the same way
at every restart, and a recomputed basis could turn within near-equal components.

    .venv/bin/python scripts/make_minilm_axes.py 128     # needs the model (make install)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memledger.recall.minilm import MiniLMEmbedder  # noqa: E402

CLS, SEP = 101, 102  # the model's [CLS] and [SEP] token ids


def minilm_axes(dim: int) -> np.ndarray:
    """float32 [dim, 384]: the top principal axes of the model's per-token outputs."""
    encoder = MiniLMEmbedder()
    vocab = encoder._w["embeddings.word_embeddings.weight"].shape[0]
    outputs = np.empty((vocab, encoder._hidden), dtype=np.float64)
    for start in range(0, vocab, 512):
        tokens = np.arange(start, min(vocab, start + 512))
        ids = np.stack([np.full_like(tokens, CLS), tokens, np.full_like(tokens, SEP)], axis=1)
        outputs[tokens] = encoder._encode(ids, np.ones_like(ids))
    outputs /= np.linalg.norm(outputs, axis=1, keepdims=True)
    _, _, axes = np.linalg.svd(outputs - outputs.mean(axis=0), full_matrices=False)
    axes = axes[:dim]
    signs = np.sign(axes[np.arange(dim), np.abs(axes).argmax(axis=1)])
    return (axes * signs[:, None]).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dim", type=int, nargs="?", default=128)
    dim = parser.parse_args().dim
    out = ROOT / "memledger" / "recall" / f"minilm_axes_{dim}.npy"
    np.save(out, minilm_axes(dim))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
