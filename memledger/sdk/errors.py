"""The SDK's errors: what the node refused, or that it could not be reached."""

from __future__ import annotations

from typing import Any, NoReturn

import httpx

__all__ = ["RECALL_UNAVAILABLE", "MemLedgerConnectionError", "MemLedgerError", "ProvenAbsent",
           "connection_error", "decision_timeout", "invalid"]

#: the problem a node without an embedder answers a search by meaning with
RECALL_UNAVAILABLE = "recall_unavailable"


class MemLedgerError(Exception):
    """A problem reported by the node (or no answer at all, see the subclass).

    `code`/`name` are the ledger result code and its slug for rejected transactions
    (e.g. 8 / "bad_signature"); for other problems `code` is None and `name` is the
    problem slug (e.g. "not_found", "invalid_request").
    """

    def __init__(self, message: str, *, status: int = 0, code: int | None = None,
                 name: str = "", title: str = "", detail: str = "",
                 problem: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.name = name
        self.title = title
        self.detail = detail
        self.problem = problem or {}

    @classmethod
    def from_response(cls, resp: httpx.Response) -> MemLedgerError:
        try:
            doc = resp.json()
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            text = resp.text.strip()[:200] or resp.reason_phrase
            return cls(f"HTTP {resp.status_code}: {text}", status=resp.status_code,
                       name=f"http_{resp.status_code}", detail=text)
        return cls.from_problem(resp.status_code, doc)

    @classmethod
    def from_problem(cls, status: int, doc: dict[str, Any]) -> MemLedgerError:
        """From an RFC 7807 document (a response's body, or one item of a batch)."""
        code = doc.get("code")
        name = str(doc.get("name") or doc.get("title") or f"http_{status}")
        detail = str(doc.get("detail") or doc.get("title") or "")
        label = f"{name} (code {code})" if isinstance(code, int) else name
        return cls(f"{label}: {detail}", status=status,
                   code=code if isinstance(code, int) else None, name=name,
                   title=str(doc.get("title", "")), detail=detail, problem=doc)


class MemLedgerConnectionError(MemLedgerError):
    """The node could not be reached (nothing is known about the request's effect)."""


class ProvenAbsent(MemLedgerError):
    """A verified read's 404 that the chain proves: no such memory at `verified_height`.
    Like a found memory's, the height may be old (a node picks the state it proves
    from): compare it with what you expect where freshness matters."""

    def __init__(self, not_found: MemLedgerError, verified_height: int) -> None:
        super().__init__(f"{not_found} (proven absent at height {verified_height})",
                         status=not_found.status, code=not_found.code, name=not_found.name,
                         title=not_found.title, detail=not_found.detail,
                         problem=not_found.problem)
        self.verified_height = verified_height


def invalid(name: str, detail: str) -> NoReturn:
    raise MemLedgerError(f"{name}: {detail}", name=name, detail=detail)


def decision_timeout(message: str) -> MemLedgerError:
    return MemLedgerError(f"decision_timeout: {message} (still proposed: its validators "
                          "have not reached a quorum yet)", name="decision_timeout",
                          detail=message)


#: What to do when nothing answers at the client's URL (a refused or failed connect).
START_HINT = ("is a memledger node running there? Start one with `memledger start` (or "
              "`make run` in a checkout), or give the client a running node's REST URL "
              "(the CLI's --api or $MEMLEDGER_API)")


def connection_error(base_url: str, exc: httpx.HTTPError) -> MemLedgerConnectionError:
    """The node at `base_url` did not answer: the URL, the transport's reason and, when
    nothing listens there (a failed connect), how to start a node."""
    message = f"cannot reach {base_url}: {type(exc).__name__}: {exc}"
    if isinstance(exc, httpx.ConnectError):
        message += f"; {START_HINT}"
    return MemLedgerConnectionError(message, name="connection_error")
