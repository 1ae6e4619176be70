"""The SDK's models and the REST API's schemas describe the same documents: one cannot
gain, lose or retype a field without the other (they drifted apart one field at a time).

The SDK cannot import the API's pydantic models (it is a light package without the
server), so the two are compared here, field by field, name and type.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from memledger.api import schemas
from memledger.sdk import models

#: (SDK dataclass, API schema, fields only the SDK has, fields only the API has)
PAIRS: list[tuple[type, type[BaseModel], set[str], set[str]]] = [
    # verified_height: set by the SDK on a verified read, never served; sealed: whether
    # the client could open a private memory (v10+), which no node knows
    (models.Memory, schemas.MemoryHit, {"verified_height", "sealed"}, set()),
    (models.Vote, schemas.Vote, set(), set()),
    (models.Corroboration, schemas.Corroboration, set(), set()),
    (models.Account, schemas.Account, set(), set()),
    (models.Validator, schemas.Validator, set(), set()),
    # embedder: the node's recall configuration, which the SDK does not model
    (models.Status, schemas.Status, set(), {"embedder"}),
]


def _plain(annotation: Any) -> Any:
    """An annotation with the API's string enums as the str they are on the wire."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum) \
            and issubclass(annotation, str):
        return str
    args = typing.get_args(annotation)
    if not args:
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return frozenset(_plain(a) for a in args)
    return (origin, tuple(_plain(a) for a in args))


def _sdk_fields(cls: type) -> dict[str, Any]:
    """The SDK model's fields and its properties (what a caller reads), with types."""
    hints = typing.get_type_hints(cls)
    out = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
    for name, member in vars(cls).items():
        if isinstance(member, property) and member.fget is not None:
            out[name] = typing.get_type_hints(member.fget)["return"]
    return out


@pytest.mark.parametrize("sdk, api, sdk_only, api_only", PAIRS,
                         ids=[p[0].__name__ for p in PAIRS])
def test_same_fields_same_types(sdk: type, api: type[BaseModel], sdk_only: set[str],
                                api_only: set[str]) -> None:
    ours = _sdk_fields(sdk)
    theirs = {name: f.annotation for name, f in api.model_fields.items()}
    assert set(ours) - sdk_only == set(theirs) - api_only, \
        f"only SDK: {set(ours) - set(theirs) - sdk_only}; " \
        f"only API: {set(theirs) - set(ours) - api_only}"
    for name in set(ours) & set(theirs):
        assert _plain(ours[name]) == _plain(theirs[name]), (sdk.__name__, name)


def test_every_required_api_field_is_read() -> None:
    """A field the API always serves is one the SDK keeps (from_json keeps known names)."""
    for sdk, api, _, _ in PAIRS:
        required = {n for n, f in api.model_fields.items() if f.is_required()}
        assert required <= set(_sdk_fields(sdk)), sdk.__name__
