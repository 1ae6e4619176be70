"""Schemathesis checks for tests/integration/test_api_conformance.py (loaded as a hooks file).

Two built-in checks are replaced by stricter or wire-exact versions:

- `schema_valid_refused_only_by_the_ledger` replaces `positive_data_acceptance`. A request
  the document calls valid may still carry a bad signature, a stale nonce or name a missing
  memory: no JSON Schema can say that, and the ledger's verdict is the answer (a problem
  with a numeric `code`). What must never happen is the server's own request validation
  (`invalid_request`, `invalid_base64`, ...) refusing it. The one exception is a
  combination of query parameters, each valid alone, that no schema of a query string
  can rule out (`rerank=true` without a meaning search): refused only by a name in
  CROSS_PARAMETER that the operation's own document states.
- `schema_invalid_rejected_on_the_wire` wraps `negative_data_rejection`: when the
  generator's "invalid" value serialises to a query string the schema accepts (a number
  given for a string tag is the text "-3.2e+16" on the wire), the server is judged on the
  bytes it received, not on the generator's intent.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import schemathesis
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import negative_data_rejection

LEDGER_TYPE = "urn:memledger:code:"
#: 4xx answers that are facts (state, an undocumented method), not shape refusals.
STATE_STATUSES = {404, 405, 409, 429}
#: 422s for parameters that are valid alone and wrong together (GET /v1/memories)
CROSS_PARAMETER = {"rerank_needs_meaning", "min_score_needs_rerank"}


def _ecma(schema: Any) -> Any:
    """The schema with pattern `$` as ECMA-262 means it (end of input): Python's `$` also
    matches before a final newline, which the server's (Rust) regex engine does not."""
    if isinstance(schema, dict):
        return {k: (v.replace("$", r"\Z") if k == "pattern" and isinstance(v, str)
                    else _ecma(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_ecma(v) for v in schema]
    return schema


def _valid(instance: Any, schema: dict[str, Any], components: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(instance, _ecma({**schema, "components": components}))
    except jsonschema.ValidationError:
        return False
    return True


def _coerce(value: str, schema: dict[str, Any]) -> Any:
    """A query string value as the JSON value the schema's type means."""
    kinds = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
    if "integer" in kinds and re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    if "number" in kinds:
        try:
            return float(value)
        except ValueError:
            pass
    if "boolean" in kinds and value in ("true", "false"):
        return value == "true"
    return value


def _sent_is_valid(case: Any, response: Any) -> bool | None:
    """Whether the request the server received satisfies the document (query string and
    JSON body, read back from the wire); None when that cannot be told from here."""
    meta = case.meta
    if meta is None or any(meta.is_negative_at(loc) for loc in (
            ParameterLocation.PATH, ParameterLocation.HEADER, ParameterLocation.COOKIE)):
        return None
    request = response.request
    components = case.operation.schema.raw_schema.get("components", {})
    sent = parse_qs(urlsplit(str(request.url)).query, keep_blank_values=True)
    definition = case.operation.definition.raw
    for param in definition.get("parameters", []):
        if param.get("in") != "query":
            continue
        name, schema = param["name"], dict(param.get("schema", {}))
        values = sent.get(name)
        if values is None:
            if param.get("required"):
                return False
            continue
        array = schema.get("type") == "array" or any(
            s.get("type") == "array" for s in schema.get("anyOf", []))
        if not _valid(values if array else _coerce(values[-1], schema), schema, components):
            return False
    media = str(request.headers.get("content-type", "")).split(";")[0].strip()
    body = request.body or b""
    body = body.encode() if isinstance(body, str) else body
    content = definition.get("requestBody", {}).get("content", {})
    if media == "application/json" and "application/json" in content:
        try:
            doc = json.loads(body)
        except ValueError:
            return False
        return _valid(doc, content["application/json"].get("schema", {}), components)
    if media == "application/octet-stream" and media in content:
        return len(body) >= 1
    return None if body else not definition.get("requestBody", {}).get("required", False)


@schemathesis.check
def schema_valid_refused_only_by_the_ledger(ctx: Any, response: Any, case: Any) -> None:
    """A schema-valid request is refused only by a ledger verdict or a state fact."""
    status = response.status_code
    if status < 400 or status >= 500 or status in STATE_STATUSES:
        return
    if _sent_is_valid(case, response) is not True:
        return  # generated as invalid, or it became so on the way (the other check's case)
    try:
        doc = response.json()
    except ValueError:
        doc = None
    if isinstance(doc, dict) and str(doc.get("type", "")).startswith(LEDGER_TYPE) \
            and isinstance(doc.get("code"), int):
        return  # the ledger judged the signed bytes (signature, nonce, state)
    if status == 413 and isinstance(doc, dict) and doc.get("name") == "body_too_large":
        return  # the documented byte limit of a body (maxLength counts characters)
    if status == 422 and isinstance(doc, dict) and doc.get("name") in CROSS_PARAMETER \
            and str(doc["name"]) in json.dumps(case.operation.definition.raw):
        return  # two parameters that exclude each other, as the document says they do
    raise AssertionError(f"schema-valid request refused by request validation: "
                         f"{status} {response.text[:300]}")


@schemathesis.check
def schema_invalid_rejected_on_the_wire(ctx: Any, response: Any, case: Any) -> None:
    """negative_data_rejection, unless the request as sent is valid after all."""
    try:
        negative_data_rejection(ctx, response, case)
    except AssertionError:
        if _sent_is_valid(case, response) is True:
            return
        raise
