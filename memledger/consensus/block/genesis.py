"""Genesis: the chain's initial app state, validated before anything is written.

`app_state` in CometBFT's genesis.json is a JSON object:
    {"app_version": n,
     "params": {"shared_domains": [...], ...},
     "scopes": [{"id": str, "domains": [str], "members": [[hex key, weight], ...]}]}
Every key is optional. Without `app_version` the chain starts at version 1, so genesis
files written before the key existed replay exactly as they did. Every field's JSON type
is checked before it is read: a wrong shape halts InitChain with one message naming the
field (GenesisError), never a TypeError.
"""

from __future__ import annotations

import json
from typing import Any

from memledger.consensus import params as chain_params
from memledger.consensus import versions
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.families.governance import scopes, validators
from memledger.protocol import records

#: Params a genesis may set that are not written unless set (adding them to every
#: genesis would change the app hash of chains that never used them).


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
    unknown = sorted(set(state) - {"app_version", "params", "scopes"})
    if unknown:
        raise GenesisError(f"unknown genesis app_state keys: {unknown}")
    return state


def initial_app_version(app_state: dict[str, Any], supported: frozenset[int]) -> int:
    """The app version the chain starts at; one this binary cannot run is an error."""
    version = app_state.get("app_version", versions.INITIAL_APP_VERSION)
    if type(version) is not int or version not in supported:
        raise GenesisError(f"genesis app_version {version!r} is not supported by this binary "
                           f"(supports {sorted(supported)})")
    return version


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
    try:
        params = chain_params.genesis_record(app_state.get("params", {}))
    except chain_params.ParamError as exc:
        raise GenesisError(str(exc)) from None
    state.put_record(records.CHAIN, {"chain_id": chain_id, "initial_height": initial_height})
    state.put_record(records.PARAMS, params)
    if "app_version" in app_state:
        state.put_record(records.APP_VERSION, {"version": app_state["app_version"],
                                               "name": "genesis", "since": initial_height})
    if not genesis_validators:
        raise GenesisError("genesis has no validators")
    validators.store(state, genesis_validators)
    version = app_state.get("app_version", versions.INITIAL_APP_VERSION)
    specs = app_state.get("scopes", [])
    if not isinstance(specs, list):
        raise GenesisError("genesis app_state scopes must be a list of scope objects, not "
                           f"{chain_params.json_type(specs)}")
    for index, spec in enumerate(specs):
        try:
            scopes.apply_scope(state, scopes.parse_spec(spec), initial_height, version)
        except scopes.ScopeError as exc:
            raise GenesisError(f"genesis scope invalid: scopes[{index}]: {exc}") from None
