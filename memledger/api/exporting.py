"""Bundles for `GET /v1/export`: the memories a filter selects, proven from one snapshot.

The projection says which memories match; the canonical store (read-only, one LMDB read
transaction for the whole bundle) gives each one's record, content and proofs at one
height H, and the light block H+1 carries the app hash they all lead to. One header for
any number of memories is what makes a 10k-memory export cheap to make and to verify.
A memory whose proven record no longer matches the filter (the projection lags the
store by a block at most) is left out, so the bundle holds what the filter says.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from memledger.api.problems import Problem
from memledger.api.proving import local_store
from memledger.api.queries import MemoryFilter, apply_filters
from memledger.projection.schema import memories
from memledger.protocol.proofs import encode_ops, record_key
from memledger.sdk.bundle.format import end_line, header_line, memory_line
from memledger.sdk.light.header import LightBlock, parse_light_block
from memledger.sdk.light.provider import fetch_rpc_light_block
from memledger.sdk.rpc import RpcClient

#: how long an export waits for block H+1, whose header carries the app hash of H
NEXT_BLOCK_WAIT_S = 30.0


def matches(record: dict[str, Any], flt: MemoryFilter) -> bool:
    """The proven record satisfies the filter (as the projection said it did)."""
    return ((flt.domain is None or record.get("domain") == flt.domain)
            and record.get("status") in flt.statuses()
            and (flt.type is None or record.get("type") == flt.type)
            and (flt.author is None or record.get("author") == flt.author.lower())
            and all(t in (record.get("tags") or []) for t in flt.tags))


def _light_block(rpc: RpcClient, height: int) -> LightBlock:
    deadline = time.monotonic() + NEXT_BLOCK_WAIT_S
    while rpc.latest_height() < height:
        if time.monotonic() > deadline:
            raise Problem(503, "no_next_block", f"block {height} was not committed within "
                                                f"{NEXT_BLOCK_WAIT_S:.0f} s")
        time.sleep(0.1)
    doc = fetch_rpc_light_block(rpc, height)
    return parse_light_block(doc["signed_header"], doc["validators"])


def open_bundle(engine: sa.Engine, rpc: RpcClient, home: Path | None,
                flt: MemoryFilter) -> Iterator[bytes]:
    """Prepare an export (errors here are problems) and return its line iterator, which
    holds the store snapshot until it is exhausted or closed."""
    store = local_store(home)
    if store is None:
        raise Problem(501, "export_needs_node", "export reads the canonical store, so it is "
                                                "served only by the REST process beside its node")
    query = apply_filters(sa.select(memories.c.id), flt).order_by(memories.c.id)
    with engine.connect() as conn:
        ids = [str(r.id) for r in conn.execute(query)]
    stack = contextlib.ExitStack()
    try:
        snap = stack.enter_context(store.snapshot())
        height = snap.last_height
        lb = _light_block(rpc, height + 1)
    except BaseException:
        stack.close()
        raise
    return _lines(stack, snap, lb, height, ids, flt)


def _lines(stack: contextlib.ExitStack, snap: Any, lb: LightBlock, height: int,
           ids: list[str], flt: MemoryFilter) -> Iterator[bytes]:
    with stack:
        yield header_line(lb.header.chain_id, height, lb) + b"\n"
        n = 0
        for memory_id in ids:
            ident = memory_id.encode()
            mkey, ckey = record_key("/memory", ident), record_key("/content", ident)
            record = snap.get(mkey)
            content = snap.get(ckey)
            if record is None or content is None or not matches(json.loads(record), flt):
                continue
            yield memory_line(n, memory_id, record, content, encode_ops(mkey, snap.prove(mkey)),
                              encode_ops(ckey, snap.prove(ckey))) + b"\n"
            n += 1
        yield end_line(n) + b"\n"
