"""Local private recall: BM25 over opened memories, fused with meaning, merged with the
node's hits before the cut (memledger.sdk.local_recall)."""

from __future__ import annotations

from collections.abc import Sequence

from memledger.sdk.local_recall import LocalIndex, merge, wanted_statuses
from memledger.sdk.models import Memory
from memledger.sdk.private import new_epoch_key, seal_content


def mem(mid: str, content: str, status: str = "committed", epoch: int | None = 1,
        domain: str = "team/x") -> Memory:
    return Memory(id=mid, domain=domain, author="a", type="fact", content=content,
                  content_hash="00", confidence_ppm=900_000, tags=[], status=status,
                  submitted_height=1, submitted_time_ns=0, decided_height=2, epoch=epoch)


DOCS = [mem("a", "the vault combination is 31-7-22"),
        mem("b", "lunch orders go to the kitchen by noon"),
        mem("c", "the staging database is rebuilt nightly", status="deprecated"),
        mem("s", seal_content(new_epoch_key(), "team/x", 1, "s", "not for you"))]


def test_words_rank_and_filters_apply_before_the_cut() -> None:
    index = LocalIndex()
    index.add(DOCS)
    assert "s" not in index.docs  # a sealed memory (not opened) is never indexed
    hits = index.search("vault combination", 5, lambda m: m.status == "committed")
    assert [h.id for h in hits] == ["a"] and hits[0].mode == "local"
    assert index.search("staging database", 5, lambda m: m.status == "committed") == []
    assert [h.id for h in index.search("staging", 5, lambda m: True)] == ["c"]


def test_meaning_ranks_a_paraphrase_with_no_shared_word() -> None:
    topics = {"vault": [1.0, 0.0], "safe": [1.0, 0.1], "lunch": [0.0, 1.0], "kitchen": [0.1, 1.0]}

    def embed(texts: list[str]) -> Sequence[Sequence[float]]:
        out = []
        for text in texts:
            vec = [0.0, 0.0]
            for word, v in topics.items():
                if word in text:
                    vec = [vec[0] + v[0], vec[1] + v[1]]
            out.append(vec)
        return out

    index = LocalIndex(embed)
    index.add(DOCS[:2])
    assert [h.id for h in index.search("what opens the safe", 1, lambda m: True)] == ["a"]


def test_merge_keeps_one_copy_and_cuts_after_fusing() -> None:
    public = [mem("p1", "x", epoch=None), mem("p2", "y", epoch=None)]
    local = [mem("a", "opened"), mem("p2", "y", epoch=None)]
    merged = merge(public, local, 2)
    assert [m.id for m in merged] == ["p2", "p1"]  # p2 is in both lists: fused higher
    assert len(merge(public, local, 10)) == 3


def test_statuses_as_the_node_defaults_them() -> None:
    assert wanted_statuses(None, False) == {"committed"}
    assert wanted_statuses(None, True) == {"committed", "challenged"}
    assert wanted_statuses(["proposed"], False) == {"proposed"}


def test_meaning_matrix_grows_with_each_add_and_widens_past_filtered_hits() -> None:
    """Adds after a query join the matrix; a re-added memory keeps one row; a filter that
    rejects the nearest rows widens the partition until enough pass."""
    def embed(texts: list[str]) -> Sequence[Sequence[float]]:
        return [[float(t.count("x")), 1.0] for t in texts]

    index = LocalIndex(embed)
    index.add([mem(f"n{i}", "x" * i, status="proposed") for i in range(300)])
    assert [h.id for h in index.search("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 1, lambda m: True)]
    index.add([mem("far", "x" * 1000), mem("n0", "", status="committed")])
    assert len(index) == 301
    hits = index.search("x" * 1000, 2, lambda m: m.status == "committed")
    assert [h.id for h in hits] == ["far", "n0"]
