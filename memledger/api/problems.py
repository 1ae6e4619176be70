"""RFC 7807 problem+json for every error the REST API can produce.

One shape for clients to branch on: `type`, `title`, `status`, `detail`, `instance`,
plus `name` (a stable slug) and, for transaction rejections, the numeric result `code`.
Nothing here ever echoes a stack trace; unexpected errors are logged server-side only.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from memledger.protocol.codes import CODESPACE, DESCRIPTIONS, NEXT_STEPS, Code

log = logging.getLogger("memledger.api")

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:memledger:problem:"
CODE_TYPE_PREFIX = "urn:memledger:code:"
#: the detail of a body nested deeper than the JSON parser's stack (a few KB of "[[[[")
NESTED_TOO_DEEPLY = "request body is not valid JSON: nested too deeply"

# Result code -> HTTP status. Anything unlisted (incl. codes newer than this table) is 422.
_BAD_REQUEST = {Code.TX_DECODE, Code.TX_NOT_CANONICAL, Code.BODY_DECODE,
                Code.BODY_NOT_CANONICAL, Code.WRONG_CHAIN_ID, Code.BAD_PUBLIC_KEY,
                Code.BAD_SIGNATURE, Code.NONCE_ZERO, Code.EMPTY_MESSAGE, Code.UNKNOWN_MESSAGE}
_FORBIDDEN = {Code.DOMAIN_WRITE_DENIED, Code.NOT_A_VALIDATOR, Code.NOT_A_SCOPE_MEMBER,
              Code.CHALLENGE_DENIED, Code.REINSTATE_DENIED, Code.GRANT_DENIED,
              Code.GOV_NOT_VALIDATOR, Code.GOV_CANCEL_DENIED, Code.SCOPE_NOT_ACTIVE,
              Code.CORRECTION_DENIED}
_NOT_FOUND = {Code.MEMORY_NOT_FOUND, Code.GRANT_NOT_FOUND, Code.GOV_PROPOSAL_NOT_FOUND,
              Code.GOV_UNKNOWN_SCOPE}
_CONFLICT = {Code.NONCE_REPLAYED, Code.NONCE_BELOW_WINDOW, Code.NONCE_PENDING,
             Code.MEMORY_TERMINAL, Code.MEMORY_ID_CONFLICT,
             Code.ALREADY_VOTED, Code.MEMORY_NOT_PROPOSED, Code.MEMORY_NOT_COMMITTED,
             Code.ALREADY_CHALLENGED, Code.MEMORY_NOT_CHALLENGED, Code.ALREADY_CORROBORATED,
             Code.COCOMMIT_DUPLICATE, Code.GOV_ALREADY_VOTED, Code.GOV_PROPOSAL_CLOSED,
             Code.GOV_SCOPE_EXISTS, Code.GOV_VALIDATOR_PINNED, Code.SUPERSEDES_TAKEN,
             Code.SUPERSEDES_NOT_COMMITTED}
_TOO_LARGE = {Code.TX_TOO_LARGE}
#: "Not now, too many from you": a signer's own backlog, so a per-client limit (clients
#: retry these like the rate limit's 429).
_TOO_MANY = {Code.SIGNER_BACKLOG_FULL}
#: Retry-After of those 429s, like the rate limit's: blocks come well within a second
BACKLOG_RETRY_AFTER_S = 1


def http_status_for_code(code: int) -> int:
    """The HTTP status that best describes a non-zero result code."""
    try:
        known = Code(code)
    except ValueError:
        return 422
    for group, status in ((_BAD_REQUEST, 400), (_FORBIDDEN, 403), (_NOT_FOUND, 404),
                          (_CONFLICT, 409), (_TOO_LARGE, 413), (_TOO_MANY, 429)):
        if known in group:
            return status
    return 422


def code_name(code: int) -> str:
    """Stable slug of a result code (`unknown_<n>` for codes newer than this build)."""
    try:
        return Code(code).slug
    except ValueError:
        return f"unknown_{code}"


def code_description(code: int) -> str:
    try:
        return DESCRIPTIONS[Code(code)]
    except (ValueError, KeyError):
        return f"transaction rejected with code {code}"


def next_step(code: int) -> str | None:
    """What a caller refused with `code` can do about it, if the code table says."""
    try:
        return NEXT_STEPS.get(Code(code))
    except ValueError:
        return None


class Problem(Exception):
    """Raise anywhere in a route to answer with a problem document."""

    def __init__(self, status: int, name: str, detail: str, *, title: str | None = None,
                 type_: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.name = name
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase
        self.type = type_ or TYPE_PREFIX + name
        self.extra = extra
        self.headers: dict[str, str] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        """Crosses a process boundary whole (the read process raises these)."""
        return (_problem_again, (self.status, self.name, self.detail, self.title, self.type,
                                 self.extra, self.headers))

    def body(self, instance: str | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = {"type": self.type, "title": self.title, "status": self.status,
                               "detail": self.detail, "name": self.name}
        if instance:
            doc["instance"] = instance
        doc.update(self.extra)
        return doc

    def response(self, instance: str | None = None) -> JSONResponse:
        return JSONResponse(self.body(instance), status_code=self.status,
                            media_type=PROBLEM_JSON, headers=self.headers or None)


def _problem_again(status: int, name: str, detail: str, title: str, type_: str,
                   extra: dict[str, Any], headers: dict[str, str]) -> Problem:
    problem = Problem(status, name, detail, title=title, type_=type_, **extra)
    problem.headers.update(headers)
    return problem


def tx_rejected(code: int, log_text: str, tx_hash: str, height: int | None = None,
                stage: str = "check_tx") -> Problem:
    """A transaction the ledger refused, with its numeric code and stable name."""
    extra: dict[str, Any] = {"code": code, "codespace": CODESPACE, "hash": tx_hash,
                             "stage": stage}
    if height is not None:
        extra["height"] = height
    description = code_description(code)
    # The rule first, then what this tx did ("content larger than 512 KiB: content is
    # 600000 bytes"): a log alone often states the fact without the limit it broke.
    detail = description
    if log_text and log_text != description:
        detail = log_text if description in log_text else f"{description}: {log_text}"
    # Then what the caller can do, where the rule alone leaves them stuck (who may vote
    # and how to become one; the tag limits).
    if (step := next_step(code)) is not None:
        detail = f"{detail}. {step}"
    problem = Problem(http_status_for_code(code), code_name(code), detail,
                      title=description, type_=CODE_TYPE_PREFIX + code_name(code), **extra)
    if problem.status == 429:  # a signer's full backlog: room comes with the next block
        problem.headers["Retry-After"] = str(BACKLOG_RETRY_AFTER_S)
    return problem


def not_found(what: str, ident: str) -> Problem:
    return Problem(404, "not_found", f"no {what} with id {ident!r}")


def _validation_detail(errors: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """One readable sentence plus a JSON-safe list (pydantic's ctx may hold exceptions)."""
    clean: list[dict[str, Any]] = []
    parts: list[str] = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        where = loc[0] if loc else "request"
        field = ".".join(loc[1:]) if len(loc) > 1 else ""
        label = {"query": "query parameter", "path": "path parameter",
                 "body": "body field", "header": "header"}.get(where, where)
        msg = str(err.get("msg", "invalid"))
        parts.append(f"{label} {field!r}: {msg}" if field else f"{label}: {msg}")
        clean.append({"loc": loc, "msg": msg, "type": str(err.get("type", ""))})
    return "; ".join(parts) or "invalid request", clean


async def _on_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return exc.response(request.url.path)


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        reason = next((str(e.get("ctx", {}).get("error", "")) for e in errors
                       if e.get("type") == "json_invalid"), "")
        problem = Problem(400, "malformed_json",
                          f"request body is not valid JSON{': ' + reason if reason else ''}")
        return problem.response(request.url.path)
    too_many = _too_many_words(errors)
    if too_many is not None:
        return too_many.response(request.url.path)
    detail, clean = _validation_detail(errors)
    return Problem(422, "invalid_request", detail, errors=clean).response(request.url.path)


def _too_many_words(errors: list[Any]) -> Problem | None:
    """A q refused only by its pattern is one with too many words: say so, as
    invalid_query, instead of quoting the pattern (a wall of Unicode ranges)."""
    from memledger.api.schemas import MAX_QUERY_WORDS
    from memledger.api.search import split_query

    if not errors or any(e.get("type") != "string_pattern_mismatch"
                         or tuple(e.get("loc", ())) != ("query", "q") for e in errors):
        return None
    words = len(split_query(str(errors[0].get("input", ""))))
    return Problem(422, "invalid_query", f"q has {words} words; at most {MAX_QUERY_WORDS} "
                   "(spaces, control characters and other Unicode whitespace separate "
                   "words)", errors=[{"loc": ["query", "q"], "msg": "too many words",
                                      "type": "string_pattern_mismatch"}])


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    names = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large",
             415: "unsupported_media_type", 400: "bad_request"}
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
    if status == 404 and detail == "Not Found":
        detail = f"no route {request.method} {request.url.path}"
    elif status == 405 and detail == "Method Not Allowed":
        detail = f"method {request.method} not allowed on {request.url.path}"
    name = names.get(status, f"http_{status}")
    if status == 400 and (unparsed := _json_refusal(exc.__cause__)) is not None:
        name, detail = "malformed_json", unparsed
    problem = Problem(status, name, detail)
    if exc.headers:
        problem.headers.update(exc.headers)
    if status == 405 and (allowed := _allowed_methods(request)):
        # none when a mounted app refused (the docs assets): its own Allow stands
        problem.headers["Allow"] = ", ".join(allowed)
    return problem.response(request.url.path)


def _json_refusal(cause: BaseException | None) -> str | None:
    """The detail POST /v1/txs gives when json.loads refuses a body FastAPI's parser also
    refused (it answers a bare 400 'error parsing the body'): nested past the stack, or an
    integer past Python's 4,300 digits (ValueError). None for any other cause."""
    if isinstance(cause, RecursionError):
        return NESTED_TOO_DEEPLY
    if isinstance(cause, ValueError):
        return f"request body is not valid JSON: {cause}"
    return None


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path: Starlette's 405 names only the first
    route that matched the path, so GET+POST /v1/memories would advertise POST alone.
    Asked per method, so nested (included) routers answer for their own routes; HEAD
    wherever GET is (the HEAD middleware serves it)."""
    allowed = [method for method in _METHODS
               if any(route.matches({**request.scope, "method": method})[0] == Match.FULL
                      for route in request.app.router.routes)]
    if "GET" in allowed and "HEAD" not in allowed:
        allowed.insert(allowed.index("GET") + 1, "HEAD")
    return allowed


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return Problem(500, "internal_error", "the server failed to handle this request; "
                   "see the node's api log").response(request.url.path)


def install(app: FastAPI) -> None:
    """Route every error path through problem+json."""
    app.add_exception_handler(Problem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(Exception, _on_unexpected)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries: each status answers with a problem document."""
    ref = {"schema": {"$ref": "#/components/schemas/Problem"}}
    return {status: {"description": HTTPStatus(status).phrase, "content": {PROBLEM_JSON: ref}}
            for status in statuses}


#: What any /v1 read can answer besides its result: bad input, absent record, the rate
#: limit (429, with Retry-After), an unreachable projection or cometbft, the timeout.
PROBLEM_RESPONSES = problem_responses(400, 404, 409, 413, 422, 429, 502, 503, 504)
