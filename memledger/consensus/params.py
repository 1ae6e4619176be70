"""Chain parameters: one table, and the only way consensus code reads or changes them.

Every parameter lives in the `sys/params` record. Genesis writes the base ones (those
without a rule) with their defaults unless app_state names a value; a rule-gated
parameter is absent until genesis or a passed `param` proposal sets it, and reads give its
default meanwhile. That split is itself consensus: it decides the bytes of `sys/params`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from memledger.consensus import versions
from memledger.consensus.store import codec
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError


class RecordView(Protocol):
    def get_record(self, key: bytes) -> Any: ...

    def put_record(self, key: bytes, record: Any) -> None: ...


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its default, the integer bounds governance may set, its rule."""

    default: int | list[str]
    bounds: tuple[int, int] | None  # None: set at genesis only, never by a proposal
    rule: str | None = None  # the version rule that introduces (and reads) it
    meaning: str = ""


#: name -> spec; one line per parameter (docs/RULES.md explains each).
PARAMS: dict[str, ParamSpec] = {
    "shared_domains": ParamSpec(["general"], None, meaning="domains anyone may write"),
    "gov_voting_period": ParamSpec(100, (1, 1_000_000), meaning="blocks a proposal is open"),
    "gov_min_upgrade_delay": ParamSpec(20, (1, 1_000_000),
                                       meaning="blocks between an upgrade's proposal and its "
                                               "activation, at least"),
    "nonce_window": ParamSpec(256, (1, 4096), rule="nonce_window",
                              meaning="recent nonces kept per signer"),
    "ballot_expiry": ParamSpec(100_000, (10, 10_000_000), rule="ballot_expiry",
                               meaning="blocks a memory ballot stays open before it expires"),
    "peer_challenges_per_block": ParamSpec(
        3, (1, 1000), rule="peer_disputes",
        meaning="peer challenges one key may make in one block (v10+)"),
    "peer_disputes_open": ParamSpec(
        16, (1, 100_000), rule="peer_disputes",
        meaning="peer disputes one key may hold open at once (v10+)"),
}


class ParamError(ValueError):
    """A genesis parameter that cannot be accepted."""


class _Decoded:
    """The last `sys/params` bytes read and what they decode to.

    Every tx reads the params (the nonce window, the shared domains) and they change only
    by governance, so decoding is keyed on the exact bytes: the same bytes give the same
    record, whichever block or CheckTx reads them, and a proposal that passes writes new
    bytes. Callers get copies, never this record.
    """

    raw: bytes | None = None
    record: dict[str, Any] = {}


def _stored(state: RecordView) -> dict[str, Any] | None:
    get = getattr(state, "get", None)
    if get is None:  # a record-only view: nothing to key the memo on
        record = state.get_record(records.PARAMS)
        return None if record is None else dict(record)
    raw = get(records.PARAMS)
    if raw is None:
        return None
    if raw != _Decoded.raw:
        _Decoded.record = dict(codec.decode(raw))
        _Decoded.raw = bytes(raw)
    return _Decoded.record


def current(state: RecordView) -> dict[str, Any]:
    """The stored parameters (before genesis wrote them: the base defaults)."""
    record = _stored(state)
    return genesis_defaults() if record is None else {
        name: _copy(v) for name, v in record.items()}


def value(state: RecordView, name: str) -> Any:
    """One parameter: its stored value, else its default."""
    record = _stored(state)
    found = PARAMS[name].default if record is None else record.get(name,
                                                                    PARAMS[name].default)
    return _copy(found)


def genesis_defaults() -> dict[str, Any]:
    """What genesis writes when app_state names no parameter."""
    return {name: _copy(spec.default) for name, spec in PARAMS.items() if spec.rule is None}


def genesis_record(overrides: Any) -> dict[str, Any]:
    """The `sys/params` record for a genesis naming `overrides`; raises ParamError.

    `overrides` is hand-written JSON, so every JSON type is checked here: a wrong shape
    must halt InitChain with a message naming the field, never a TypeError."""
    if not isinstance(overrides, dict):
        raise ParamError("genesis params must be a JSON object of name: value, not "
                         f"{json_type(overrides)}")
    chosen = genesis_defaults()
    for name, given in sorted(overrides.items()):
        spec = PARAMS.get(name)
        if spec is None:
            raise ParamError(f"unknown genesis param {name!r}")
        if type(given) is not type(spec.default):
            raise ParamError(f"genesis param {name!r} has the wrong type: "
                             f"{json_type(given)}, not {json_type(spec.default)}")
        if isinstance(given, list) and not all(isinstance(item, str) for item in given):
            bad = next(item for item in given if not isinstance(item, str))
            raise ParamError(f"genesis param {name!r} must be a list of strings, not one "
                             f"holding {json_type(bad)}")
        if spec.bounds is not None:  # what governance may set, genesis may too; no more
            low, high = spec.bounds
            if not isinstance(given, int) or not low <= given <= high:
                raise ParamError(f"genesis param {name!r} must be an int in {low}..{high}")
        chosen[name] = given
    chosen["shared_domains"] = sorted(set(chosen["shared_domains"]))
    return chosen


def check_proposal(name: str, proposed: int, app_version: int) -> None:
    """Raise TxError unless governance may set `name` to `proposed` at this version."""
    spec = PARAMS.get(name)
    if spec is None or spec.bounds is None or (
            spec.rule is not None and not versions.active(spec.rule, app_version)):
        raise TxError(Code.GOV_UNKNOWN_PARAM, f"unknown parameter {name[:64]!r}")
    low, high = spec.bounds
    if not low <= proposed <= high:
        raise TxError(Code.GOV_INVALID_PARAM_VALUE, f"{name} must be in {low}..{high}")


def set_value(state: RecordView, name: str, new: int) -> None:
    """Write one parameter (a passed proposal; checked by check_proposal first)."""
    params = current(state)
    params[name] = new
    state.put_record(records.PARAMS, params)


def json_type(value: Any) -> str:
    """A JSON value's type as a genesis author would name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", str: "a string", list: "a list", dict: "an object"}.get(
        type(value), type(value).__name__)


def _copy(default: Any) -> Any:
    return list(default) if isinstance(default, list) else default
