"""What every node holds after the heal: the records the checker compares the history with.

Read over each node's REST API (plain reads: the checker compares nodes with each other
and with the history, so no node is trusted for another) and its RPC (headers).
"""

from __future__ import annotations

from typing import Any

from memledger.devtools.chaos.history import History
from memledger.sdk import Client, MemLedgerError
from memledger.testnet.net import Testnet


def challengers(rounds: list[dict[str, Any]]) -> list[str]:
    """Every key that opened or joined one of a memory's dispute rounds."""
    return sorted({str(key).lower() for r in rounds
                   for key in [r.get("opener"), *r.get("challengers", [])] if key})


def _memory(client: Client, mid: str, votes: bool, challenges: bool) -> dict[str, Any] | None:
    try:
        m = client.get_memory(mid)
    except MemLedgerError as err:
        if err.status == 404:
            return None
        raise
    out: dict[str, Any] = {"status": m.status, "content_hash": m.content_hash,
                           "submitted_height": m.submitted_height,
                           "history": [list(h) for h in m.history]}
    if votes:
        out["voters"] = sorted(v.voter.lower() for v in client.votes(mid))
    if challenges:
        out["challengers"] = challengers(client.challenges(mid))
    return out


def final_state(net: Testnet, history: History) -> dict[str, Any]:
    """{"nodes": {name: {"height", "memories": {id: record | None}}}, "divergence",
    "common_height"}; a node that does not answer is listed with "error"."""
    ops = history.ops
    ids = sorted({o.args["memory_id"] for o in ops if o.kind == "submit"})
    voted = {o.args["memory_id"] for o in ops if o.kind == "vote"}
    challenged = {o.args["memory_id"] for o in ops if o.kind == "challenge"}
    nodes: dict[str, Any] = {}
    for node in net.nodes:
        try:
            with Client(node.api_url, timeout=30) as client:
                nodes[node.name] = {
                    "height": client.status().height,
                    "memories": {mid: _memory(client, mid, mid in voted, mid in challenged)
                                 for mid in ids}}
        except MemLedgerError as err:
            nodes[node.name] = {"error": str(err)}
    report = net.check(projections=False, timeout=60)
    divergence = None
    if report.divergence is not None:
        d = report.divergence
        divergence = f"height {d.height} {d.node} {d.field}: {d.expected} != {d.found}"
    return {"nodes": nodes, "divergence": divergence, "common_height": report.common_height,
            "unreachable": list(report.unreachable)}
