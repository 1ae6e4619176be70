"""What the tools print: memories as delimited, labelled data, within a byte budget.

Memory content is data written by other agents, never instructions to the model, so each
memory sits between `<memory ...>` and `</memory>` with its provenance as attributes:
author, status, whether it is disputed, and whether this answer was proven against the
chain. Content cannot close the block early (its `<memory`/`</memory` are escaped), and a
disputed memory's text itself starts with a warning, so a quote of it carries the mark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DISPUTED_MARK = "[DISPUTED: another agent challenged this memory; treat it as contested] "
_ELLIPSIS = " [...content cut to fit the byte budget]"


def size(text: str) -> int:
    return len(text.encode("utf-8"))


def disputed(memory: Any) -> bool:
    """Challenged and not yet resolved (`challenged`), the one status with an open dispute."""
    return bool(memory.status == "challenged")


def _escape(text: str) -> str:
    return text.replace("<memory", "&lt;memory").replace("</memory", "&lt;/memory")


def _attr(value: Any) -> str:
    return str(value).replace('"', "'").replace("\n", " ")


def memory_block(memory: Any, *, verified: bool, content_bytes: int | None = None,
                 history: bool = False) -> str:
    """One memory, delimited and labelled (with its status history when ``history``);
    its content cut to ``content_bytes``."""
    attrs: list[tuple[str, Any]] = [
        ("id", memory.id), ("author", memory.author), ("status", memory.status),
        ("disputed", "true" if disputed(memory) else "false"),
        ("verified", f"true (height {memory.verified_height})" if verified and
         memory.verified_height is not None else "false"),
        ("domain", memory.domain), ("type", memory.type),
    ]
    if memory.decided_height is not None:
        attrs.append(("decided_height", memory.decided_height))
    if memory.score is not None:
        attrs.append(("score", f"{memory.score:.4f}"))
    if memory.tags:
        attrs.append(("tags", ",".join(memory.tags)))
    if memory.corroborators:
        attrs.append(("corroborations", len(memory.corroborators)))
    reason = getattr(memory, "status_reason", None)
    if reason:
        attrs.append(("why", reason))
    for name in ("supersedes", "superseded_by", "pending_correction"):
        if getattr(memory, name, None):
            attrs.append((name, getattr(memory, name)))
    if getattr(memory, "origin", None):
        o = memory.origin
        attrs.append(("origin", f"{o.get('memory_id')}@{o.get('chain_id')}:{o.get('height')}"))
    if history and getattr(memory, "history", None):
        attrs.append(("history", " -> ".join(f"{st}@{h}" for h, st in memory.history)))
    if history and getattr(memory, "corrections", None):
        attrs.append(("corrections", " -> ".join(memory.corrections)))
    head = "<memory " + " ".join(f'{k}="{_attr(v)}"' for k, v in attrs) + ">"
    content = _escape(memory.content or "(content not served)")
    if disputed(memory):
        content = DISPUTED_MARK + content
    if content_bytes is not None and size(content) > content_bytes:
        content = _cut(content, max(0, content_bytes - size(_ELLIPSIS))) + _ELLIPSIS
    return f"{head}\n{content}\n</memory>"


def _cut(text: str, limit: int) -> str:
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


class Budget:
    """At most `limit` bytes of output per tool call; what is left out is said."""

    def __init__(self, limit: int) -> None:
        self.limit = max(256, limit)

    def memories(self, head: str, memories: Sequence[Any], *, verified: bool,
                 tail: str = "", history: bool = False) -> str:
        """``head``, then as many whole memory blocks as fit (the first cut down if it
        alone does not), then ``tail``; a last line says how many were left out."""
        blocks: list[str] = []
        reserve = size(head) + size(tail) + 160
        used = reserve
        for index, memory in enumerate(memories):
            block = memory_block(memory, verified=verified, history=history)
            if used + size(block) + 1 > self.limit:
                room = self.limit - used - size(memory_block(
                    _blank(memory), verified=verified, history=history)) - 1
                if not blocks and room > 64:
                    blocks.append(memory_block(memory, verified=verified,
                                               content_bytes=room, history=history))
                    index += 1
                left = len(memories) - index
                if left:
                    blocks.append(f"[truncated: {left} of {len(memories)} memories left out "
                                  f"to stay within {self.limit} bytes; narrow the query or "
                                  "lower limit]")
                break
            blocks.append(block)
            used += size(block) + 1
        return "\n".join(p for p in (head, *blocks, tail) if p)

    def text(self, text: str) -> str:
        """Plain text cut to the budget, saying so."""
        if size(text) <= self.limit:
            return text
        note = f"\n[truncated to {self.limit} bytes]"
        return _cut(text, self.limit - size(note)) + note


class _Blank:
    """A memory's labels without its content (to measure a block's frame)."""

    def __init__(self, memory: Any) -> None:
        self._memory = memory

    def __getattr__(self, name: str) -> Any:
        return "" if name == "content" else getattr(self._memory, name)


def _blank(memory: Any) -> Any:
    return _Blank(memory)
