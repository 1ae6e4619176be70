"""Cross-node consistency: block headers at every common height, projections at one height.

Headers: for every height every node stores (1.., or from where a node that joined by
state sync starts) up to min(latest heights) all reachable nodes must agree on the
block id, the header app hash and the last-results hash (the header of height h commits
to the state after h-1), and at the common height on the FinalizeBlock app hash too.

Why headers suffice for the app: before a node applies block h+1 its cometbft checks the
header's app hash against what its own app returned for h, and stops on a mismatch; so a
node that stores (and so reports) block h+1 had the agreed state at h. The state after
the top common height is covered by comparing FinalizeBlock app hashes there.

Projections: a node's projection changes only through a flush, and every flush commits
its rows together with a new ``(height, app_hash)`` receipt in one SQL transaction. So a
dump taken between two reads of the latest receipt that return the same height is an
exact picture of the projection at that height (a seqlock read: no locks, no pause of
the node). Snapshots are retaken until every node has one at the same height, and those
are compared row by row. Nodes keep committing under load meanwhile; nothing needs to be
stopped. Receipts are left out because a rebuilt projection only holds the last one.
"""

from __future__ import annotations

import base64
import binascii
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memledger.projection.schema import make_engine, metadata, receipts
from memledger.sdk.rpc import RpcClient, RpcError
from memledger.sdk.waiting import wait_until
from memledger.sqlite_uri import sqlite_path

HEADER_FIELDS = ("block_hash", "app_hash", "last_results_hash")
TRANSPORT_ERRORS = (httpx.HTTPError, RpcError, OSError, KeyError)
Dump = dict[str, list[tuple[Any, ...]]]


@dataclass(frozen=True)
class NodeTarget:
    """How to reach one node: its CometBFT RPC and its projection database."""

    name: str
    rpc_url: str
    db_url: str = ""


@dataclass(frozen=True)
class Divergence:
    """The first place where one node disagrees with the majority."""

    height: int
    node: str
    field: str
    expected: str
    found: str

    def __str__(self) -> str:
        return (f"divergence at height {self.height}: {self.node} {self.field} = "
                f"{self.found} (others: {self.expected})")


@dataclass
class CheckReport:
    nodes: list[str]
    heights: dict[str, int] = field(default_factory=dict)
    #: lowest height every node still stores (above 1 once a node joined by state sync)
    first_common_height: int = 1
    common_height: int = 0
    projection_height: int | None = None
    divergence: Divergence | None = None
    unreachable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.divergence is None

    @property
    def conclusive(self) -> bool:
        """False when some comparison could not be made (a node down, no common snapshot)."""
        return self.divergence is not None or (not self.unreachable and not self.notes)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["conclusive"] = self.conclusive
        return data


class NoCommonSnapshot(RuntimeError):
    """Projections never showed the same height on every node within the timeout."""


def majority(values: dict[str, Any]) -> Any:
    """Most common value; ties go to the value of the first node in order."""
    counts = Counter(values.values())
    best = max(counts.values())
    return next(v for v in values.values() if counts[v] == best)


def first_disagreement(values: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """(node, expected, found) for the first node off the majority, if any."""
    ref = majority(values)
    for name, value in values.items():
        if value != ref:
            return name, ref, value
    return None


# --- headers ------------------------------------------------------------------------------


def fetch_headers(client: RpcClient, low: int, high: int) -> dict[int, dict[str, str]]:
    """Header fields of heights low..high via /blockchain (20 metas per call)."""
    out: dict[int, dict[str, str]] = {}
    top = high
    while top >= low:
        bottom = max(low, top - 19)
        res = client.call("blockchain", {"minHeight": str(bottom), "maxHeight": str(top)})
        for meta in res["block_metas"]:
            header = meta["header"]
            out[int(header["height"])] = {
                "block_hash": meta["block_id"]["hash"],
                "app_hash": header["app_hash"],
                "last_results_hash": header["last_results_hash"],
            }
        top = bottom - 1
    return out


def finalize_app_hash(client: RpcClient, height: int) -> str:
    """App hash returned by FinalizeBlock at ``height`` (not yet in any header), in the
    headers' upper-case hex. CometBFT serves it in base64 here: upper-cased as it came,
    two hashes whose base64 differed only in letter case compared equal."""
    raw = str(client.block_results(height).get("app_hash") or "")
    try:
        return base64.b64decode(raw, validate=True).hex().upper()
    except (binascii.Error, ValueError):
        return raw.upper()  # hex already


def compare_headers(headers: dict[str, dict[int, dict[str, str]]],
                    heights: Sequence[int]) -> Divergence | None:
    for height in heights:
        for name in HEADER_FIELDS:
            values = {node: h[height][name] for node, h in headers.items()}
            found = first_disagreement(values)
            if found:
                node, expected, got = found
                return Divergence(height, node, f"header.{name}", expected, got)
    return None


# --- projections --------------------------------------------------------------------------


class ProjectionReader:
    """Read-only view of one node's projection: no DDL, no writes (unlike Projection())."""

    def __init__(self, db_url: str) -> None:
        path = sqlite_path(db_url)
        if path is not None and not Path(path).exists():
            raise FileNotFoundError(f"no projection database at {path}")
        self.engine: Engine = make_engine(db_url)

    def last_height(self) -> int | None:
        with self.engine.connect() as conn:
            value = conn.execute(sa.select(sa.func.max(receipts.c.height))).scalar()
        return None if value is None else int(value)

    def dump(self) -> Dump:
        """Same rows and order as ``Projection.dump()``: every table but receipts, by key."""
        out: Dump = {}
        with self.engine.connect() as conn:
            for table in metadata.sorted_tables:
                if table is receipts:
                    continue
                keys = list(table.primary_key.columns)
                rows = conn.execute(sa.select(table).order_by(*keys)).all()
                out[table.name] = [tuple(r) for r in rows]
        return out

    def snapshot(self, attempts: int = 10) -> tuple[int, Dump] | None:
        """A dump known to be exactly the projection at the returned height (seqlock)."""
        for _ in range(attempts):
            before = self.last_height()
            dump = self.dump()
            if before is not None and self.last_height() == before:
                return before, dump
        return None

    def close(self) -> None:
        self.engine.dispose()


def matched_snapshots(targets: Sequence[NodeTarget], timeout: float = 30.0,
                      poll: float = 0.05, keep: int = 6) -> tuple[int, dict[str, Dump]]:
    """Projection dumps of every target taken at one common height (the highest seen)."""
    readers = {t.name: ProjectionReader(t.db_url) for t in targets}
    seen: dict[str, dict[int, Dump]] = {name: {} for name in readers}

    def matched() -> tuple[int, dict[str, Dump]] | None:
        for name, reader in readers.items():
            snap = reader.snapshot()
            if snap is not None:
                seen[name][snap[0]] = snap[1]
                for old in sorted(seen[name])[:-keep]:
                    del seen[name][old]
        common = set.intersection(*(set(s) for s in seen.values()))
        if not common:
            return None
        height = max(common)
        return height, {name: s[height] for name, s in seen.items()}

    def no_common(message: str) -> NoCommonSnapshot:
        last = {name: max(s) if s else None for name, s in seen.items()}
        return NoCommonSnapshot(f"{message}: heights seen {last}")

    try:
        return wait_until(matched, timeout, poll, what="a common projection height",
                          error=no_common)
    finally:
        for reader in readers.values():
            reader.close()


def _key_getter(table_name: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    table = metadata.tables[table_name]
    names = [c.name for c in table.columns]
    idx = [names.index(c.name) for c in table.primary_key.columns]
    return lambda row: tuple(row[i] for i in idx)


def compare_dumps(dumps: dict[str, Dump], height: int) -> Divergence | None:
    """First row (table order, then key order) on which a node leaves the majority."""
    tables = sorted({t for d in dumps.values() for t in d},
                    key=lambda t: [x.name for x in metadata.sorted_tables].index(t)
                    if t in metadata.tables else 1 << 30)
    for table in tables:
        key_of = _key_getter(table)
        keyed = {node: {key_of(r): r for r in d.get(table, [])} for node, d in dumps.items()}
        all_keys = sorted({k for rows in keyed.values() for k in rows}, key=repr)
        for key in all_keys:
            found = first_disagreement({node: rows.get(key) for node, rows in keyed.items()})
            if found:
                node, expected, got = found
                label = key[0] if len(key) == 1 else key
                return Divergence(height, node, f"projection.{table}[{label!r}]",
                                  repr(expected), repr(got))
    return None


# --- the whole check ----------------------------------------------------------------------


def _reachable(targets: Sequence[NodeTarget], report: CheckReport) -> dict[str, RpcClient]:
    clients: dict[str, RpcClient] = {}
    for t in targets:
        client = RpcClient(t.rpc_url, timeout=10)
        try:
            sync = client.status()["sync_info"]
            report.heights[t.name] = int(sync["latest_block_height"])
            earliest = int(sync.get("earliest_block_height") or 1)
            report.first_common_height = max(report.first_common_height, earliest)
            clients[t.name] = client
        except TRANSPORT_ERRORS:
            client.close()
            report.unreachable.append(t.name)
    return clients


def _finalize_app_hashes(clients: dict[str, RpcClient], height: int,
                         report: CheckReport) -> dict[str, str]:
    """Each node's FinalizeBlock app hash at `height`; a node that cannot answer is
    noted (the check is then inconclusive), not taken for a divergence."""
    found = {}
    for name, client in clients.items():
        try:
            found[name] = finalize_app_hash(client, height)
        except TRANSPORT_ERRORS as exc:
            report.notes.append(f"{name}: no FinalizeBlock app hash at height {height}: "
                                f"{exc}")
    return found


def check(targets: Sequence[NodeTarget], *, projections: bool = True,
          timeout: float = 30.0) -> CheckReport:
    """Compare every reachable node; unreachable nodes are listed, not failed."""
    report = CheckReport(nodes=[t.name for t in targets])
    clients = _reachable(targets, report)
    try:
        if len(clients) < 2:
            report.notes.append(f"only {len(clients)} node(s) reachable; nothing to compare")
            return report
        top = report.common_height = min(report.heights[n] for n in clients)
        low = report.first_common_height
        if low > top:  # a node still below a state-synced node's first block
            report.notes.append(f"no block every reachable node holds: the lowest is at "
                                f"height {top}, a state-synced node's first block is {low}")
            return report
        headers: dict[str, dict[int, dict[str, str]]] = {}
        for name, client in list(clients.items()):
            try:
                headers[name] = fetch_headers(client, low, top)
            except TRANSPORT_ERRORS:  # went away mid-check: treat as unreachable
                report.unreachable.append(name)
                clients.pop(name).close()
        if len(clients) < 2:
            report.notes.append("fewer than 2 nodes answered; nothing to compare")
            return report
        report.divergence = compare_headers(headers, range(low, top + 1))
        if report.divergence is None and top >= 1:
            found = first_disagreement(_finalize_app_hashes(clients, top, report))
            if found:
                report.divergence = Divergence(top, found[0], "finalize.app_hash",
                                               found[1], found[2])
        if projections and report.divergence is None:
            live = [t for t in targets if t.name in clients and t.db_url]
            try:
                height, dumps = matched_snapshots(live, timeout=timeout)
            except (NoCommonSnapshot, FileNotFoundError, sa.exc.SQLAlchemyError) as exc:
                report.notes.append(str(exc))
            else:
                report.projection_height = height
                report.divergence = compare_dumps(dumps, height)
    finally:
        for c in clients.values():
            c.close()
    return report
