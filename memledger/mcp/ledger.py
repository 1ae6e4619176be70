"""The MCP server's one seam to the SDK: the async client it talks to the node with, and
the SDK's failures as ToolFailure (a result-code name and a one-line reason).

Everything else in memledger.mcp sees the client only through `Ledger.client`.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memledger.sdk import AsyncClient as SdkClient
from memledger.sdk import MemLedgerConnectionError, MemLedgerError
from memledger.sdk.light.errors import VerificationError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from memledger.sdk.keys import Agent
    from memledger.sdk.light import TrustRoot

__all__ = ["Ledger", "SdkClient", "ToolFailure", "failures_as_tool_errors"]


class ToolFailure(Exception):
    """A tool's failure as the model sees it: `name` (the ledger's result-code name or a
    problem slug) and a one-line `reason`."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = " ".join(reason.split())


@dataclass
class Ledger:
    """One node, one agent key: the client every tool call shares (its nonce source keeps
    concurrent writes by this key distinct)."""

    api_url: str
    agent: Agent
    trust: TrustRoot | None = None
    trust_store: Path | None = None
    timeout: float = 60.0

    def __post_init__(self) -> None:
        self._client: SdkClient | None = None

    @property
    def author(self) -> str:
        return self.agent.public_key_hex

    @property
    def client(self) -> SdkClient:
        """Made on first use, inside the server's event loop (the HTTP pool is bound to
        it)."""
        if self._client is None:
            self._client = SdkClient(self.api_url, key=self.agent, timeout=self.timeout,
                                     trust=self.trust, trust_store=self.trust_store)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


@contextmanager
def failures_as_tool_errors(api_url: str) -> Iterator[None]:
    """The SDK's exceptions as ToolFailure: a node that is down is one `node_unreachable`
    line, a refused transaction its result-code name, a failed proof `not_verified`."""
    try:
        yield
    except ToolFailure:
        raise
    except MemLedgerConnectionError:
        raise ToolFailure("node_unreachable", f"the memledger node at {api_url} does not "
                                              "answer; nothing was read or written") from None
    except MemLedgerError as exc:
        name = exc.name or "ledger_error"
        reason = exc.detail or str(exc)
        if reason.startswith(f"{name}: "):
            reason = reason[len(name) + 2:]
        raise ToolFailure(name, reason or name) from None
    except VerificationError as exc:
        raise ToolFailure("not_verified", f"the chain does not prove this answer: {exc}") \
            from None
