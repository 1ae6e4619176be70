"""An agent's inbox: what happened on the ledger that concerns it, since a given height.

Derived by a client from the REST API alone (no server support): the agent's memories
(their status history, dispute rounds, corroborations and votes) and the memories
committed in domains it watches. Every event carries the chain height it happened at,
and a read covers the heights ``(since, through]`` where ``through`` is the node's
indexed height when the read began, so a caller that keeps ``through`` as its next
``since`` sees each event exactly once: an event indexed while the read runs is above
``through`` and belongs to the next read.

Limits: a further challenger joining an open dispute round is recorded on chain without
a height, so it is not an event of its own (the round's opening and outcome are); each
read walks all of the agent's memories and every committed memory of the watched domains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from memledger.sdk.checks import Statuses

__all__ = ["InboxEvent", "InboxRead", "KINDS", "read_inbox", "take"]

#: event kinds, in the order the text describes them
KINDS = ("decided", "challenged", "deprecated", "reinstated", "corroborated", "committed")
_PAGE = 500
_DECIDED = ("committed", "deprecated")
#: every status: an author's own memories concern them whatever became of them
ALL_STATUSES = ("proposed", "committed", "challenged", "deprecated", "superseded")


class _Reader(Protocol):
    """What the inbox needs of an async SDK client (AsyncClient has it)."""

    async def status(self) -> Any: ...

    async def memory_page(self, *, domain: str | None = ..., status: Statuses = ...,
                          author: str | None = ..., include_disputed: bool = ...,
                          limit: int = ..., cursor: str | None = ...) -> Any: ...

    async def votes(self, memory_id: str) -> list[Any]: ...

    async def challenges(self, memory_id: str) -> list[dict[str, Any]]: ...

    async def corroborations(self, memory_id: str) -> list[Any]: ...


@dataclass(frozen=True)
class InboxEvent:
    """One thing that happened to a memory, at a chain height.

    `kind` is one of KINDS: `decided` (validators committed or rejected the agent's
    proposed memory; `status` says which), `challenged` / `deprecated` / `reinstated`
    (a dispute round on it opened, was lost, was won), `corroborated` (another agent
    backed it), `committed` (a memory by someone else committed in a watched domain).
    """

    height: int
    kind: str
    memory_id: str
    status: str
    domain: str
    author: str
    by: list[str]
    reason: str | None = None
    content: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InboxRead:
    """Events in ``(since, through]``, oldest first."""

    since: int
    through: int
    events: list[InboxEvent]


async def read_inbox(client: _Reader, author: str, since: int = 0,
                     domains: Sequence[str] = ()) -> InboxRead:
    """Everything in ``(since, through]`` that concerns ``author`` (hex key), plus memories
    other agents got committed in ``domains``; ``through`` is the node's indexed height."""
    through = int((await client.status()).projection_height)
    events: list[InboxEvent] = []
    if through > since:
        async for memory in _all(client, author=author, status=ALL_STATUSES):
            events += await _own_events(client, memory, since, through)
        seen = set()
        for domain in dict.fromkeys(domains):
            async for memory in _all(client, domain=domain, status="committed"):
                if memory.author == author or memory.id in seen:
                    continue
                height = _last_commit(memory)
                if height is not None and since < height <= through:
                    seen.add(memory.id)
                    events.append(_event(memory, height, "committed", [memory.author],
                                         content=memory.content))
    events.sort(key=lambda e: (e.height, KINDS.index(e.kind), e.memory_id))
    return InboxRead(since, max(since, through), events)


def take(read: InboxRead, fits: Any) -> tuple[list[InboxEvent], int]:
    """The events to show and the cursor to keep: whole heights only, while ``fits(shown)``
    holds, so an event not shown is never behind the kept cursor (and never lost). The
    events of the first height are always taken, so a cursor always moves forward."""
    shown: list[InboxEvent] = []
    cursor = read.since
    heights = sorted({e.height for e in read.events})
    for height in heights:
        batch = [e for e in read.events if e.height == height]
        if shown and not fits(shown + batch):
            return shown, cursor
        shown += batch
        cursor = height
    return shown, read.through


async def _all(client: _Reader, **filters: Any) -> Any:
    cursor: str | None = None
    while True:
        page = await client.memory_page(limit=_PAGE, cursor=cursor, **filters)
        for memory in page.items:
            yield memory
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _last_commit(memory: Any) -> int | None:
    commits = [int(h) for h, status in memory.history if status == "committed"]
    return commits[-1] if commits else None


def _event(memory: Any, height: int, kind: str, by: list[str], *, status: str | None = None,
           reason: str | None = None, content: str | None = None) -> InboxEvent:
    return InboxEvent(height=height, kind=kind, memory_id=memory.id,
                      status=status or memory.status, domain=memory.domain,
                      author=memory.author, by=by, reason=reason or None, content=content)


async def _own_events(client: _Reader, memory: Any, since: int,
                      through: int) -> list[InboxEvent]:
    events: list[InboxEvent] = []
    history = [(int(h), str(s)) for h, s in memory.history]
    rounds: list[dict[str, Any]] | None = None
    previous = None
    for height, status in history:
        before, previous = previous, status
        if not since < height <= through:
            continue
        if before in (None, "proposed") and status in _DECIDED:
            events.append(await _decision(client, memory, height, status, history))
            continue
        if status == "challenged" or before == "challenged":
            if rounds is None:
                rounds = await client.challenges(memory.id)
            events.append(_dispute(memory, height, status, before, rounds))
    if memory.corroborators:
        for c in await client.corroborations(memory.id):
            if since < int(c.height) <= through:
                events.append(_event(memory, int(c.height), "corroborated", [c.agent],
                                     status="committed"))
    return events


async def _decision(client: _Reader, memory: Any, height: int, status: str,
                    history: list[tuple[int, str]]) -> InboxEvent:
    """A decision and why: the node's reason while it is the memory's latest status,
    else the reasons the voters gave on chain for the side that won."""
    reason = memory.status_reason if history[-1] == (height, status) else None
    voters: list[str] = []
    votes = [v for v in await client.votes(memory.id) if int(v.height) <= height]
    side = "accept" if status == "committed" else "reject"
    for vote in votes:
        if vote.decision == side:
            voters.append(vote.voter)
    if reason is None:
        given = [v.reason for v in votes if v.decision == side and v.reason]
        reason = "; ".join(given) or None
    return _event(memory, height, "decided", voters, status=status, reason=reason)


def _dispute(memory: Any, height: int, status: str, before: str | None,
             rounds: list[dict[str, Any]]) -> InboxEvent:
    opened = [r for r in rounds if int(r.get("opened_height", -1)) <= height]
    round_ = opened[-1] if opened else {}
    reasons = round_.get("reasons") or {}
    if status == "challenged":
        opener = str(round_.get("opener", ""))
        return _event(memory, height, "challenged", [opener] if opener else [],
                      status=status, reason=reasons.get(opener))
    if status == "committed":
        by = round_.get("reinstated_by")
        return _event(memory, height, "reinstated", [by] if by else [], status=status)
    challengers = list(round_.get("challengers") or [])
    text = "; ".join(str(reasons[c]) for c in challengers if reasons.get(c))
    return _event(memory, height, "deprecated", challengers, status=status, reason=text)
