"""Governance tools for a validator's operator (`memledger mcp --operator`): list the
proposals and vote on one with the node's validator key, which stays on this machine
(the vote is signed here and sent as bytes through the REST API, like every write)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult, ToolAnnotations
from nacl.signing import SigningKey
from pydantic import Field

from memledger.mcp.tools import Tools
from memledger.sdk import NonceSource
from memledger.sdk.txbuilder import TxBuilder

_DECISIONS = {"yes": "accept", "no": "reject", "abstain": "abstain"}


@dataclass
class OperatorTools:
    """`proposals` and `vote_proposal` over the tools' ledger connection."""

    tools: Tools
    validator_key: SigningKey
    nonces: NonceSource = field(default_factory=NonceSource)

    async def proposals(
        self,
        open_only: Annotated[bool, Field(description="Only proposals still open to votes.")]
        = True,
    ) -> CallToolResult:
        """List governance proposals (validator set, parameters, upgrades, scopes) with
        their status and votes so far. For validator operators."""
        async def run() -> str:
            items = await self.tools.ledger.client.proposals()
            if open_only:
                items = [p for p in items if p.get("status") == "open"]
            if not items:
                return "no open proposals" if open_only else "no proposals"
            mine = bytes(self.validator_key.verify_key).hex()
            return "\n".join(_line(p, mine) for p in items)
        return await self.tools.answer(run())

    async def vote_proposal(
        self,
        proposal_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9._:/@-]{1,128}$",
                                          description="The proposal's id, e.g. p3.")],
        decision: Annotated[Literal["yes", "no", "abstain"], Field(
            description="yes, no or abstain.")],
    ) -> CallToolResult:
        """Vote on a governance proposal with this node's validator key. Only when the
        operator asked you to: a vote is final."""
        async def run() -> str:
            client = self.tools.ledger.client
            builder = TxBuilder(self.validator_key, await client.chain_id())
            tx = builder.gov_vote(self.nonces.next(), proposal_id, _DECISIONS[decision])
            receipt = await client.broadcast(tx, wait="commit")
            if not receipt.included:
                return f"vote {decision} on {proposal_id}: tx {receipt.hash} is {receipt.status}"
            return f"voted {decision} on {proposal_id} at height {receipt.height}"
        return await self.tools.answer(run())


def _line(proposal: dict[str, Any], mine: str) -> str:
    votes = proposal.get("votes") or {}
    voted = " (you voted)" if mine in votes else ""
    payload = json.dumps(proposal.get("payload"), sort_keys=True)
    return (f"{proposal.get('id')} {proposal.get('status')} {proposal.get('kind')} "
            f"votes={len(votes)}{voted} {payload}")


def operator_functions(ops: OperatorTools) -> list[tuple[str, Any, ToolAnnotations]]:
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False,
                             open_world_hint=False)
    return [("proposals", ops.proposals, ToolAnnotations(read_only_hint=True,
                                                          open_world_hint=False)),
            ("vote_proposal", ops.vote_proposal, writes)]
