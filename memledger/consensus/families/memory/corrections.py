"""Corrections (v10+, rule "corrections"): a submit naming the memory it supersedes.

A correction is an ordinary proposed memory with `supersedes` set. At submit the target
must exist (SUPERSEDES_NOT_FOUND), be in the same domain (SUPERSEDES_OTHER_DOMAIN), be
the signer's to correct, as its author or coauthor or as the domain's owner or a modify
holder (CORRECTION_DENIED), be neither superseded nor awaiting another correction
(SUPERSEDES_TAKEN), and be committed (SUPERSEDES_NOT_COMMITTED). The target then carries
`pending_correction` until the correction's ballot is decided: committed, the target
becomes `superseded` in that block with `superseded_by` (a challenged target's open round
ends as `superseded`; a target deprecated meanwhile keeps that status but gets the link);
deprecated or expired, the target is left as it was, the marker removed.
"""

from __future__ import annotations

from collections.abc import Callable

from memledger.consensus.families.access.domains import can_modify, check_name
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.families.memory.record import MemoryRecord, load, set_status
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError

Events = list[tuple[str, list[tuple[str, str]]]]
#: ends the open dispute round of a challenged memory a correction supersedes (injected
#: by the disputes family, which owns rounds: see disputes.handlers.close_for_correction)
CloseRound = Callable[[TxBuffer, MemoryRecord, int], None]


def check_target(state: TxBuffer, target_id: str, domain: str, signer: bytes,
                 height: int) -> MemoryRecord:
    """The memory a correction in `domain` by `signer` may supersede, or a TxError."""
    try:
        check_name(target_id, Code.SUPERSEDES_NOT_FOUND, "superseded memory id")
    except TxError as err:
        raise TxError(Code.SUPERSEDES_NOT_FOUND, err.log) from None
    target = load(state, target_id)
    if target is None:
        raise TxError(Code.SUPERSEDES_NOT_FOUND, f"memory {target_id!r} to supersede not found")
    if target["domain"] != domain:
        raise TxError(Code.SUPERSEDES_OTHER_DOMAIN,
                      f"memory {target_id!r} is in domain {target['domain']!r}, not {domain!r}")
    me = signer.hex()
    if not (target["author"] == me or me in (target.get("coauthors") or [])
            or can_modify(state, domain, signer, height)):
        raise TxError(Code.CORRECTION_DENIED,
                      f"memory {target_id!r} is not yours to correct: its author or a "
                      f"modify-grant holder of {domain!r} may (the owner grants it: "
                      f"`memledger grant {domain} KEY --level modify`); challenge it instead")
    if target["status"] == records.STATUS_SUPERSEDED:
        raise TxError(Code.SUPERSEDES_TAKEN, f"memory {target_id!r} is already superseded by "
                                             f"{target.get('superseded_by')!r}")
    if "pending_correction" in target:
        raise TxError(Code.SUPERSEDES_TAKEN,
                      f"memory {target_id!r} has a pending correction "
                      f"{target['pending_correction']!r}")
    if target["status"] != records.STATUS_COMMITTED:
        raise TxError(Code.SUPERSEDES_NOT_COMMITTED,
                      f"memory {target_id!r} is {target['status']}, not committed")
    return target


def settle(state: TxBuffer, correction: MemoryRecord, height: int, close_round: CloseRound,
           events: Events) -> None:
    """The ballot of `correction` was just decided (its status is final): apply it to the
    memory it supersedes, if any."""
    target_id = correction.get("supersedes")
    if target_id is None:
        return
    target = load(state, target_id)
    if target is None:
        raise AssertionError(f"correction {correction['id']!r} names no memory {target_id!r}")
    if target.get("pending_correction") == correction["id"]:
        del target["pending_correction"]
    if correction["status"] == records.STATUS_COMMITTED:
        target["superseded_by"] = correction["id"]
        if target["status"] == records.STATUS_CHALLENGED:
            close_round(state, target, height)
        if target["status"] in (records.STATUS_COMMITTED, records.STATUS_CHALLENGED):
            set_status(target, records.STATUS_SUPERSEDED, height)
        events.append(("memory", [("id", target_id), ("status", target["status"]),
                                  ("superseded_by", correction["id"])]))
    state.put_record(records.memory_key(target_id), target)
