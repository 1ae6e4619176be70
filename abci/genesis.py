"""Genesis: the chain's initial app state, validated before anything is written.

`app_state` in CometBFT's genesis.json is a JSON object:
    {"params": {"shared_domains": [...], ...},
     "scopes": [{"id": str, "domains": [str], "members": [[hex key, weight], ...]}]}
Both keys are optional.
"""

from __future__ import annotations

import json
from typing import Any

from abci import records, scopes, validators
from abci.context import TxBuffer


class GenesisError(ValueError):
    """The genesis app state is unusable; the node must not start a chain from it."""


def parse_app_state(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        state = json.loads(raw, parse_float=_reject_float)
    except (ValueError, GenesisError) as exc:
        raise GenesisError(f"genesis app_state is not valid JSON without floats: {exc}") from None
    if not isinstance(state, dict):
        raise GenesisError("genesis app_state must be a JSON object")
    unknown = sorted(set(state) - {"params", "scopes"})
    if unknown:
        raise GenesisError(f"unknown genesis app_state keys: {unknown}")
    return state


def _reject_float(text: str) -> Any:
    raise GenesisError(f"floats are not allowed in genesis ({text})")


def apply_genesis(
    state: TxBuffer,
    chain_id: str,
    initial_height: int,
    genesis_validators: list[tuple[str, int]],
    app_state: dict[str, Any],
) -> None:
    """Write the initial state: chain facts, params, validator set and scopes."""
    params = dict(records.DEFAULT_PARAMS)
    for key, value in sorted(app_state.get("params", {}).items()):
        if key not in params:
            raise GenesisError(f"unknown genesis param {key!r}")
        if type(value) is not type(params[key]):
            raise GenesisError(f"genesis param {key!r} has the wrong type")
        params[key] = value
    params["shared_domains"] = sorted(set(params["shared_domains"]))
    state.put_record(records.CHAIN, {"chain_id": chain_id, "initial_height": initial_height})
    state.put_record(records.PARAMS, params)
    if not genesis_validators:
        raise GenesisError("genesis has no validators")
    validators.store(state, genesis_validators)
    for spec in app_state.get("scopes", []):
        try:
            scopes.apply_scope(state, scopes.parse_spec(spec), height=initial_height)
        except scopes.ScopeError as exc:
            raise GenesisError(f"genesis scope invalid: {exc}") from None
