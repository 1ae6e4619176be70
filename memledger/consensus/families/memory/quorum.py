"""Pure quorum arithmetic. Integers only: a float here would fork the chain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ACCEPT = "accept"
REJECT = "reject"
ABSTAIN = "abstain"
DECISIONS = (ACCEPT, REJECT, ABSTAIN)


@dataclass(frozen=True, slots=True)
class Tally:
    """Weights per decision over one electorate; silent members count only in `total`."""

    accept: int
    reject: int
    abstain: int
    total: int
    all_voted: bool


def tally(votes: Mapping[str, str], electorate: Sequence[tuple[str, int]]) -> Tally:
    """Sum the electorate's weights by decision. Votes by non-members are ignored."""
    accept = reject = abstain = total = 0
    all_voted = True
    for member, weight in electorate:
        total += weight
        decision = votes.get(member)
        if decision is None:
            all_voted = False
        elif decision == ACCEPT:
            accept += weight
        elif decision == REJECT:
            reject += weight
        else:
            abstain += weight
    return Tally(accept, reject, abstain, total, all_voted)


def has_supermajority(part: int, total: int) -> bool:
    """Strict two-thirds: 3·part > 2·total (so 0 of 0 never passes)."""
    return 3 * part > 2 * total


def decide(result: Tally) -> str | None:
    """`committed` on quorum, `deprecated` once everyone voted without it, else None."""
    if has_supermajority(result.accept, result.total):
        return "committed"
    if result.all_voted:
        return "deprecated"
    return None
