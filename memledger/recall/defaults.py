"""The default embedder's spec, on its own so that reading a node's config (the CLI on an
agent's machine, without numpy) does not load the embedders themselves."""

from __future__ import annotations

#: `memledger.recall.embedder` spec a new node gets (docs/RECALL.md)
DEFAULT_EMBEDDER = "minilm-int8:128"
