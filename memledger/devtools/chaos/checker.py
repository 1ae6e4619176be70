"""Judge a campaign: the recorded history against what every node holds after the heal.

Pure: it takes the history's operations and the probe's final state (probe.py) and
returns a Verdict; tests/unit/devtools/test_chaos_checker.py feeds it made-up histories,
good and bad. What it checks (docs/CHAOS.md):

- lost writes: every acknowledged (ok) submit, vote and challenge is on every node;
- divergence: no two nodes reported different app hashes at one height (the status
  samples taken during the run), and the headers agree after the heal (the probe);
- monotonic reads: on each node, a read that started after another ended never saw a
  lower height;
- stale verified reads: a verified read accepted only what the chain held at the height
  it proved (the record's content, submitted height and status at that height);
- unknowns: every write whose outcome was unknown happened on every node or on none;
- recovery: after each heal, the chain moved on within ``bound_s``.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from memledger.devtools.chaos.history import OK, UNKNOWN, Op

WRITES = ("submit", "vote", "challenge")


@dataclass
class Verdict:
    operations: dict[str, int] = field(default_factory=dict)  # "kind:outcome" -> count
    faults: list[str] = field(default_factory=list)
    lost_writes: list[str] = field(default_factory=list)
    divergences: list[str] = field(default_factory=list)
    nonmonotonic_reads: list[str] = field(default_factory=list)
    stale_verified_reads: list[str] = field(default_factory=list)
    unresolved_unknowns: list[str] = field(default_factory=list)
    resolved_unknowns: dict[str, int] = field(default_factory=dict)  # happened / not
    recovery_s: list[float] = field(default_factory=list)
    slow_recoveries: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost_writes or self.divergences or self.nonmonotonic_reads
                    or self.stale_verified_reads or self.unresolved_unknowns
                    or self.slow_recoveries or self.unreachable)

    def summary(self) -> dict[str, Any]:
        rec = sorted(self.recovery_s)
        return {
            "ok": self.ok,
            "operations": sum(self.operations.values()),
            "by_kind": dict(sorted(self.operations.items())),
            "faults_injected": len(self.faults),
            "faults": self.faults,
            "acked_writes_lost": len(self.lost_writes),
            "divergences": len(self.divergences),
            "nonmonotonic_reads": len(self.nonmonotonic_reads),
            "stale_verified_reads": len(self.stale_verified_reads),
            "unresolved_unknowns": len(self.unresolved_unknowns),
            "resolved_unknowns": self.resolved_unknowns,
            "recovery_s_p50": round(statistics.median(rec), 2) if rec else None,
            "recovery_s_max": round(rec[-1], 2) if rec else None,
            "slow_recoveries": self.slow_recoveries,
            "unreachable": self.unreachable,
            "examples": {k: v[:5] for k, v in (
                ("lost_writes", self.lost_writes), ("divergences", self.divergences),
                ("nonmonotonic_reads", self.nonmonotonic_reads),
                ("stale_verified_reads", self.stale_verified_reads),
                ("unresolved_unknowns", self.unresolved_unknowns)) if v},
        }


def _happened(op: Op, record: dict[str, Any] | None) -> bool:
    """Does this node's record show the write?"""
    if record is None:
        return False
    if op.kind == "submit":
        return True
    signer = str(op.args.get("signer", "")).lower()
    key = "voters" if op.kind == "vote" else "challengers"
    return signer in record.get(key, [])


def _status_at(record: dict[str, Any], height: int) -> str | None:
    """The memory's status in the state after block ``height`` (None: not there yet)."""
    if record["submitted_height"] > height:
        return None
    status = "proposed"
    for h, st in record.get("history", []):
        if int(h) <= height:
            status = str(st)
    return status


def check_writes(ops: list[Op], nodes: dict[str, dict[str, Any]], v: Verdict) -> None:
    resolved: Counter[str] = Counter()
    for op in ops:
        if op.kind not in WRITES or op.outcome not in (OK, UNKNOWN):
            continue
        mid = op.args["memory_id"]
        seen = {name: _happened(op, n["memories"].get(mid)) for name, n in nodes.items()}
        what = f"{op.kind} {mid} by {op.process} at {op.start}s"
        if op.outcome == OK:
            missing = sorted(name for name, s in seen.items() if not s)
            if missing:
                v.lost_writes.append(f"{what}: acknowledged, missing on {', '.join(missing)}")
        elif all(seen.values()):
            resolved["happened"] += 1
        elif not any(seen.values()):
            resolved["did_not_happen"] += 1
        else:
            v.unresolved_unknowns.append(f"{what}: on {sorted(k for k, s in seen.items() if s)}"
                                         " only")
    v.resolved_unknowns = dict(resolved)


def check_app_hashes(ops: list[Op], v: Verdict) -> None:
    seen: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for op in ops:
        if op.kind == "read" and op.outcome == OK and op.result.get("app_hash"):
            seen[int(op.result["height"])][op.result["app_hash"]].add(f"n{op.node}")
    for height in sorted(seen):
        if len(seen[height]) > 1:
            v.divergences.append(f"height {height}: " + "; ".join(
                f"{h[:16]} on {','.join(sorted(n))}" for h, n in sorted(seen[height].items())))


def check_monotonic(ops: list[Op], v: Verdict) -> None:
    by_node: dict[int, list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind == "read" and op.outcome == OK and "height" in op.result:
            by_node[op.node].append(op)
    for node, reads in by_node.items():
        reads.sort(key=lambda o: o.end)
        for b in reads:
            before = [a for a in reads if a.end < b.start]
            if before:
                top = max(before, key=lambda a: int(a.result["height"]))
                if int(top.result["height"]) > int(b.result["height"]):
                    v.nonmonotonic_reads.append(
                        f"n{node}: read at {b.start}s saw height {b.result['height']} after "
                        f"one ending at {top.end}s saw {top.result['height']}")


def check_verified_reads(ops: list[Op], final: dict[str, dict[str, Any]], v: Verdict) -> None:
    """``final``: memory id -> the record all nodes agree on (None: absent)."""
    for op in ops:
        if op.kind != "verified_read" or op.outcome != OK:
            continue
        mid, got = op.args["memory_id"], op.result
        height = int(got["verified_height"])
        record = final.get(mid)
        held = None if record is None else _status_at(record, height)
        what = f"n{op.node} {mid} at height {height} ({op.start}s)"
        if got.get("absent"):
            if held is not None:
                v.stale_verified_reads.append(f"{what}: accepted absence, chain held {held}")
        elif record is None or held is None:
            v.stale_verified_reads.append(f"{what}: accepted a record the chain never held "
                                          "by then")
        elif got["content_hash"] != record["content_hash"] or got["status"] != held:
            v.stale_verified_reads.append(
                f"{what}: accepted {got['status']}/{got['content_hash'][:12]}, chain held "
                f"{held}/{record['content_hash'][:12]}")


def check_recovery(ops: list[Op], bound_s: float, v: Verdict) -> None:
    for op in ops:
        if op.kind != "fault":
            continue
        v.faults.append(f"{op.args['name']}: {op.result.get('detail', '')}")
        took = op.result.get("recovery_s")
        if took is None or took > bound_s:
            v.slow_recoveries.append(f"{op.args['name']} healed at {op.end}s: "
                                     f"progress after {took} s (bound {bound_s} s)")
        else:
            v.recovery_s.append(float(took))


def agreed_records(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Memory id -> its record on the first node holding it (nodes are compared by the
    write and divergence checks; this is the chain's record for the verified-read check)."""
    out: dict[str, Any] = {}
    for n in nodes.values():
        for mid, rec in n["memories"].items():
            if out.get(mid) is None:
                out[mid] = rec
    return out


def check(ops: list[Op], final: dict[str, Any], *, bound_s: float = 60.0) -> Verdict:
    v = Verdict()
    v.operations = dict(Counter(f"{o.kind}:{o.outcome}" for o in ops if o.kind != "fault"))
    nodes = {name: n for name, n in final["nodes"].items() if "error" not in n}
    v.unreachable = sorted(set(final["nodes"]) - set(nodes)) + list(final.get("unreachable", []))
    if final.get("divergence"):
        v.divergences.append(f"after heal: {final['divergence']}")
    check_writes(ops, nodes, v)
    check_app_hashes(ops, v)
    check_monotonic(ops, v)
    check_verified_reads(ops, agreed_records(nodes), v)
    check_recovery(ops, bound_s, v)
    return v
