"""The auto-voter judges a private memory (v10+) by its envelope only."""

from __future__ import annotations

from memledger.daemon.voter import PRIVATE_REASON, Candidate, Voter, decide
from memledger.sdk import private

ENVELOPE = private.seal_content(private.new_epoch_key(), "team/x", 1, "p1", "ok")


def test_a_private_memory_is_accepted_on_its_envelope() -> None:
    cand = Candidate("p1", "team/x", ENVELOPE, "00", 900_000, False, epoch=1)
    assert decide(cand) == ("accept", PRIVATE_REASON)


def test_the_confidence_floor_still_applies() -> None:
    cand = Candidate("p1", "team/x", ENVELOPE, "00", 1, False, epoch=1)
    assert decide(cand)[0] == "reject"


def test_content_checks_would_judge_ciphertext_and_are_skipped() -> None:
    """A duplicate envelope cannot happen honestly (fresh nonce per memory), and a
    'short' check on ciphertext means nothing: neither decides a private memory."""
    cand = Candidate("p1", "team/x", "x", "00", 900_000, True, epoch=1)
    assert decide(cand) == ("accept", PRIVATE_REASON)
    assert decide(Candidate("p1", "team/x", "x", "00", 900_000, True))[0] == "reject"


class _Neighbours:
    asked = 0

    def neighbours(self, *args: object) -> list[object]:
        self.asked += 1
        return []


def test_the_near_copy_check_never_reads_a_private_memory() -> None:
    voter = Voter.__new__(Voter)
    source = _Neighbours()
    voter.neighbours = source  # type: ignore[assignment]
    voter.near_copy_cosine = 0.9
    cand = Candidate("p1", "team/x", ENVELOPE, "00", 900_000, False, epoch=1)
    assert voter._near_copy(cand) is cand
    assert source.asked == 0
