"""Recall by meaning: embeddings and a vector index derived from the SQL projection.

Nothing here is on the consensus path. Every node computes embeddings itself from the
committed content (an author never supplies a vector), keeps them in an approximate
nearest-neighbour index beside the projection, tagged with the embedder that built it,
and rebuilds that index from the projection whenever it is missing, stale or from
another model. Modules:

- `embedder`: the Embedder interface and its implementations (MiniLM int8 by default).
- `index`: the persisted, quantised HNSW index (usearch) and its metadata.
- `indexer`: the follower that feeds the index from the projection after Commit.
- `hybrid`: text, semantic and hybrid (RRF) ranking with filters applied before top-k.
"""
