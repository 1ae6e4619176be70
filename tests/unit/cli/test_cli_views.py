"""What the CLI's list views print of each memory (issue 34): content cut to a preview is
marked as cut, with its full length, so a reader never takes the start for the whole."""

from __future__ import annotations

from pathlib import Path

from memledger.cli.client import PREVIEW_CHARS, preview, recall_line, search_line
from memledger.sdk import Memory


def _memory(content: str | None, score: float | None = None) -> Memory:
    return Memory(id="m1", domain="general", author="a" * 64, type="fact", content=content,
                  content_hash="", confidence_ppm=900_000, tags=[], status="committed",
                  submitted_height=3, submitted_time_ns=0, decided_height=4, score=score)


def test_content_that_fits_is_shown_whole_without_a_mark() -> None:
    exact = "x" * PREVIEW_CHARS
    assert preview(exact) == repr(exact)
    assert preview("short") == "'short'" and preview(None) == "''"


def test_cut_content_is_marked_with_an_ellipsis_and_its_length() -> None:
    text = "y" * (PREVIEW_CHARS + 1)
    assert preview(text) == f"{'y' * PREVIEW_CHARS!r}… ({PREVIEW_CHARS + 1} chars)"
    # the mark stays outside the quotes: content that itself ends in … is not taken for it
    assert preview("…" * 70).startswith(repr("…" * PREVIEW_CHARS) + "… (70 chars)")


def test_search_and_recall_lines_use_the_marked_preview() -> None:
    long = "The staging DB is on port 5433, behind the VPN, reachable from CI only " * 2
    assert search_line(_memory(long)) == f"m1  [committed]  general  {preview(long)}"
    assert recall_line(_memory(long, 0.5)) == f"0.5000  m1  [committed]  {preview(long)}"
    assert search_line(_memory(long)).endswith(f"… ({len(long)} chars)")


def test_a_rejected_tx_says_why_and_what_to_do(tmp_path: Path) -> None:
    """`memledger tx HASH` of a refused tx gave its code and name, not the ledger's log."""
    from memledger.api.broadcast import outcome_from_tx
    from memledger.cli.client import describe_tx
    from memledger.protocol.codes import NEXT_STEPS, Code
    from memledger.sdk import TxReceipt
    from tests.support.chain import LocalChain, seeded_key

    chain = LocalChain(tmp_path / "chain")
    try:
        alice = seeded_key("views-alice")
        b = chain.builder(alice)
        chain.block([b.submit(chain.next_nonce(alice), "m-1", "Awaiting its validators")])
        [result] = chain.block([b.vote(chain.next_nonce(alice), "m-1")])
        height = chain.height
    finally:
        chain.close()
    found = {"hash": "AB" * 32, "height": str(height),
             "tx_result": {"code": result.code, "log": result.log}}
    receipt = TxReceipt.from_json(outcome_from_tx(found))
    assert describe_tx(receipt) == (
        f"tx {'ab' * 32}: rejected at height {height} (code 51 not_a_validator): "
        f"{result.log}. {NEXT_STEPS[Code.NOT_A_VALIDATOR]}")
    included = TxReceipt(status="included", hash="cd" * 32, code=0, name="ok", height=7)
    assert describe_tx(included) == f"tx {'cd' * 32}: included at height 7 (code 0 ok)"


def test_get_shows_a_memorys_corrections_and_origin_only_when_it_has_them() -> None:
    from dataclasses import replace

    from memledger.cli.client import describe_memory

    plain = describe_memory(_memory("a fact"))
    assert "supersedes" not in plain and "corrections" not in plain and "origin" not in plain
    corrected = replace(_memory("a fact"), status="superseded", superseded_by="m2",
                        corrections=["m1", "m2"],
                        origin={"chain_id": "other", "height": 7, "memory_id": "x1",
                                "author": "b" * 64})
    shown = describe_memory(corrected)
    assert "superseded: m2" in shown
    assert "corrections: m1 -> m2 (oldest first)" in shown
    assert f"origin:     x1 on chain other at height 7, by {'b' * 64}" in shown
