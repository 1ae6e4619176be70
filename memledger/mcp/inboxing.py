"""The inbox as text: events since the key's kept cursor, within a byte budget, the
cursor moved past exactly what is shown (shared by the MCP tool and `memledger inbox`)."""

from __future__ import annotations

from collections.abc import Sequence

from memledger.mcp.cursors import CursorStore
from memledger.mcp.ledger import Ledger
from memledger.mcp.render import Budget, memory_block, size
from memledger.sdk.inbox import InboxEvent, read_inbox, take


async def show_inbox(ledger: Ledger, cursors: CursorStore, budget: Budget,
                     since: int | None, domains: Sequence[str]) -> str:
    """The inbox of ``ledger``'s key as text within ``budget``: after its kept cursor
    (moved past what is shown), or after ``since`` (a peek: the cursor stays)."""
    key = ledger.author
    async with cursors.lock(key):
        start = cursors.load(key) if since is None else since
        read = await read_inbox(ledger.client, key, start, domains)
        head = f"inbox: events after height {start}"

        def fits(events: list[InboxEvent]) -> bool:
            return size(_inbox_text(head, events, read.through)) <= budget.limit - 200

        shown, cursor = take(read, fits)
        if since is None:
            cursors.save(key, cursor)
    text = _inbox_text(head, shown, cursor)
    if len(shown) < len(read.events):
        text += (f"\n[{len(read.events) - len(shown)} more events after height {cursor} "
                 "did not fit the byte budget: call inbox again to see them]")
    elif since is not None:
        text += "\n(peek with since: your inbox position did not move)"
    return budget.text(text)


def _inbox_text(head: str, events: list[InboxEvent], through: int) -> str:
    if not events:
        return f"{head}: nothing new (checked through height {through})"
    count = f"{len(events)} event" + ("" if len(events) == 1 else "s")
    lines = [f"{head}, through height {through}: {count}"]
    lines += [_event_line(e) for e in events]
    return "\n".join(lines)


def _event_line(event: InboxEvent) -> str:
    by = ", ".join(event.by) or "unknown"
    reason = f' reason="{_quoted(event.reason)}"' if event.reason else ""
    where = f"memory {event.memory_id} (domain {event.domain})"
    if event.kind == "decided":
        verdict = "committed" if event.status == "committed" else "rejected"
        return f"- height {event.height}: your {where} was {verdict} by {by}{reason}"
    if event.kind == "committed":
        block = memory_block(_Committed(event), verified=False, content_bytes=400)
        return f"- height {event.height}: new memory committed in domain {event.domain}\n{block}"
    verbs = {"challenged": "was challenged by", "deprecated": "lost its dispute; challengers",
             "reinstated": "was reinstated by", "corroborated": "was corroborated by"}
    return f"- height {event.height}: your {where} {verbs[event.kind]} {by}{reason}"


def _quoted(text: str) -> str:
    return " ".join(text.split()).replace('"', "'")[:300]


class _Committed:
    """An inbox `committed` event shaped as a memory for memory_block."""

    def __init__(self, event: InboxEvent) -> None:
        self.id, self.author, self.status = event.memory_id, event.author, event.status
        self.domain, self.type, self.content = event.domain, "memory", event.content
        self.decided_height, self.score = event.height, None
        self.tags: list[str] = []
        self.corroborators: list[str] = []
        self.verified_height = None
