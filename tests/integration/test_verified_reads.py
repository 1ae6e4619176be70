"""Verified reads end to end on a real node (memledger start: cometbft + app + API + voter).

- Headers and commits served by the real cometbft hash and verify in the Python light
  client; tampered ones are rejected, each with its own reason.
- An honest node's memories pass `get(verify=True)`, `search(verify=True)` and the CLI's
  `--verify` (sync and async SDK).
- A memory whose content is edited in the node's SQL projection, and a REST response
  rewritten by a proxy, are shown by plain reads but fail verified reads with a reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from memledger.sdk import (
    AsyncClient,
    Client,
    Memory,
    ProvenAbsent,
)
from memledger.sdk.keys import Agent
from memledger.sdk.light import GenesisRoot, LightClient, PinnedRoot, TrustOptions
from memledger.sdk.light.encoding import time_ns
from memledger.sdk.light.errors import CommitError, HeaderError, ProofError, TrustError
from memledger.sdk.light.header import FLAG_ABSENT, CommitSig
from memledger.sdk.light.provider import RestProvider, RpcProvider
from tests.support.http_server import serving
from tests.support.node import REPO, NodeRunner, wait_api_ready

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-vr"
HONEST = "the build cache lives in .cache/ under the repo root"
FORGED = "the build cache lives in /tmp and may be deleted"


class Env:
    def __init__(self, node: NodeRunner) -> None:
        self.node = node
        self.genesis = node.home / "cometbft" / "config" / "genesis.json"
        self.root = GenesisRoot.from_file(self.genesis)

    def sdk(self, url: str | None = None) -> Client:
        return Client(url or self.node.api_url, key=Agent.generate(), trust=self.root)

    def cli(self, *args: str, api: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYTHONPATH=str(REPO), MEMLEDGER_HOME=str(self.node.home))
        if api:
            env["MEMLEDGER_API"] = api
        return subprocess.run([sys.executable, "-m", "memledger.cli.main", *args],
                              capture_output=True, text=True, timeout=120, env=env, cwd=REPO)

    def committed(self, content: str, tag: str) -> Memory:
        with self.sdk() as ml:
            receipt = ml.submit(None, content, tags=[tag])
            assert receipt.memory_id
            deadline = time.monotonic() + 60
            while True:
                m = ml.get(receipt.memory_id)
                if m.status == "committed":
                    return m
                # the same words with the same specifics are a near-copy the voter rejects
                assert m.status == "proposed", f"{m.status}: {m.status_reason}"
                assert time.monotonic() < deadline, "auto-voter never committed the memory"
                time.sleep(0.3)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[Env]:
    runner = NodeRunner(tmp_path_factory.mktemp("vr") / "home", chain_id=CHAIN, voter=True)
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        yield Env(runner)
    finally:
        runner.stop()


# --- real headers and commits ----------------------------------------------------------


def test_header_hash_equals_cometbft_block_id(env: Env) -> None:
    provider = RpcProvider(env.node.rpc_url)
    with env.node.rpc() as rpc:
        latest = rpc.latest_height()
        for h in sorted({1, 2, max(1, latest // 2), latest - 1}):
            lb = provider.light_block(h)
            block_id = rpc.block(h)["block_id"]["hash"]
            assert lb.header.hash().hex().upper() == block_id
            assert lb.validators.hash() == lb.header.validators_hash


def test_the_first_header_carries_the_genesis_time(env: Env) -> None:
    """CometBFT v0.38 stamps the block at the initial height with the genesis time: the
    genesis root holds the chain to it (and its trusting period runs from it)."""
    genesis_time = json.loads(env.genesis.read_text())["genesis_time"]
    first = RpcProvider(env.node.rpc_url).light_block(env.root.initial_height).header
    assert first.height == env.root.initial_height == 1
    assert first.time_ns == env.root.genesis_time_ns == time_ns(genesis_time)
    assert LightClient(RestProvider(env.node.api_url), env.root, wait_s=5).verify_to(1) \
        .header == first


def test_light_client_verifies_real_chain_and_rejects_tampering(env: Env) -> None:
    provider = RpcProvider(env.node.rpc_url)
    lc = LightClient(provider, env.root, wait_s=5)
    with env.node.rpc() as rpc:
        target = rpc.latest_height() - 1
    assert lc.verify_to(target).header.hash() == provider.light_block(target).header.hash()

    good = provider.light_block(target + 1)
    sig = good.commit.signatures[0]
    forged_sig = bytes([sig.signature[0] ^ 1]) + sig.signature[1:]
    forged = replace(good, commit=replace(good.commit, signatures=(
        replace(sig, signature=forged_sig),)))
    absent = replace(good, commit=replace(good.commit, signatures=(
        CommitSig(FLAG_ABSENT, b"", 0, 0, b""),)))
    reasons = {}
    for name, lb, exc in (("forged", forged, CommitError), ("unsigned", absent, CommitError)):
        fresh = LightClient(provider, env.root, wait_s=5)
        fresh.verify_to(target)
        fresh.provider = _Fixed(provider, {target + 1: lb})
        with pytest.raises(exc) as err:
            fresh.verify_to(target + 1)
        reasons[name] = err.value.reason
    other = LightClient(provider, replace(env.root, chain_id="another-chain"), wait_s=5)
    with pytest.raises(HeaderError) as herr:
        other.verify_to(target)
    reasons["chain"] = herr.value.reason
    expired = LightClient(provider, env.root, wait_s=5,
                          options=TrustOptions(period_ns=1_000_000_000),
                          now_ns=lambda: time.time_ns() + 3600 * 1_000_000_000)
    with pytest.raises(TrustError) as terr:
        expired.verify_to(target)
    reasons["expired"] = terr.value.reason
    assert reasons == {"forged": "bad_signature", "unsigned": "insufficient_power",
                       "chain": "wrong_chain_id", "expired": "expired"}


def test_pinned_root_through_the_rest_pass_through(env: Env) -> None:
    # the pin is block 3 and the target the last block but one: build the blocks here
    # rather than count on the tests before this one (alone, the chain was at height 2)
    filler = 0
    with env.node.rpc() as rpc:
        while rpc.latest_height() < 6:
            env.committed(f"pinned-root filler {filler}", f"vr-pin-{filler}")
            filler += 1
    rpc_provider = RpcProvider(env.node.rpc_url)
    pin = rpc_provider.light_block(3).header
    lc = LightClient(RestProvider(env.node.api_url), PinnedRoot(3, pin.hash()), wait_s=5)
    with env.node.rpc() as rpc:
        target = rpc.latest_height() - 1
    assert lc.verify_to(target).header.hash() == rpc_provider.light_block(target).header.hash()
    assert lc.chain_id == CHAIN
    bad = LightClient(RestProvider(env.node.api_url), PinnedRoot(3, bytes(32)), wait_s=5)
    with pytest.raises(TrustError):
        bad.verify_to(target)


class _Fixed:
    def __init__(self, inner: RpcProvider, fixed: dict[int, object]) -> None:
        self.inner, self.fixed = inner, fixed

    def light_block(self, height: int):  # type: ignore[no-untyped-def]
        return self.fixed.get(height) or self.inner.light_block(height)

    def latest_height(self) -> int:
        return self.inner.latest_height()


# --- honest reads ----------------------------------------------------------------------


def test_honest_node_passes_sdk_and_cli_verification(env: Env) -> None:
    memory = env.committed(f"{HONEST} (honest) {time.time_ns()}", "vr-honest")
    with env.sdk() as ml:
        verified = ml.get(memory.id, verify=True)
        assert verified.content == memory.content and verified.status == "committed"
        assert verified.verified_height is not None
        hits = list(ml.search("honest", verify=True))
        assert [h.id for h in hits] == [memory.id]
        with pytest.raises(ProvenAbsent) as err:  # a 404 that the chain proves, and where
            ml.get("no-such-memory", verify=True)
        assert err.value.status == 404 and verified.verified_height is not None
        assert err.value.verified_height >= verified.verified_height

    async def run() -> Memory:
        async with AsyncClient(env.node.api_url, trust=env.root) as aml:
            got = await aml.get(memory.id, verify=True)
            found = [m async for m in aml.search("honest", verify=True)]
            assert [m.id for m in found] == [memory.id]
            return got

    assert asyncio.run(run()).content == memory.content
    out = env.cli("get", memory.id, "--verify")
    assert out.returncode == 0, out.stderr
    assert "verified: committed state at height" in out.stdout
    out = env.cli("search", "honest", "--verify", "--json")
    assert out.returncode == 0, out.stderr
    assert [m["id"] for m in json.loads(out.stdout)] == [memory.id]
    out = env.cli("recall", "honest", "--mode", "text", "--verify", "--json")
    assert out.returncode == 0, out.stderr
    assert [m["id"] for m in json.loads(out.stdout)] == [memory.id]
    # Pinned trust from the CLI, with headers straight from cometbft RPC.
    pin = RpcProvider(env.node.rpc_url).light_block(2).header.hash().hex()
    out = env.cli("get", memory.id, "--verify", "--trust-height", "2", "--trust-hash", pin,
                  "--rpc", env.node.rpc_url)
    assert out.returncode == 0, out.stderr
    out = env.cli("get", memory.id, "--verify", "--trust-height", "2", "--trust-hash", "00" * 32)
    assert out.returncode == 3 and "pinned" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


# --- tampering -------------------------------------------------------------------------


def test_projection_edit_is_caught_by_verified_reads(env: Env) -> None:
    memory = env.committed(f"{HONEST} (projection) {time.time_ns()}", "vr-proj")
    db = sqlite3.connect(env.node.home / "data" / "projection.db", timeout=30)
    with db:
        db.execute("UPDATE memories SET content = ? WHERE id = ?", (FORGED, memory.id))
    db.close()
    with env.sdk() as ml:
        assert ml.get(memory.id).content == FORGED  # the plain read shows the edit
        with pytest.raises(ProofError) as err:
            ml.get(memory.id, verify=True)
        assert err.value.reason == "served_differs" and "content" in str(err.value), err.value
        # The edit reaches the full-text index too: the forged words find it.
        hits = list(ml.search("deleted"))
        assert [h.id for h in hits] == [memory.id] and hits[0].content == FORGED, hits
        with pytest.raises(ProofError):
            list(ml.search("deleted", verify=True))
    plain = env.cli("get", memory.id)
    assert plain.returncode == 0 and FORGED in plain.stdout
    for args in (("get", memory.id, "--verify"), ("search", "deleted", "--verify"),
                 ("recall", "projection", "--verify")):  # the word index kept its words
        out = env.cli(*args)
        assert out.returncode == 3, out
        assert out.stderr.count("\n") == 1 and "verification failed" in out.stderr, out.stderr
        assert "content differs" in out.stderr, out.stderr
    out = env.cli("get", memory.id, "--verify", "--json")
    assert out.returncode == 3
    error = json.loads(out.stderr)
    assert (error["kind"], error["reason"]) == ("proof", "served_differs"), error


class _Proxy(BaseHTTPRequestHandler):
    """Forwards GETs to the real API and rewrites HONEST text in the JSON it returns."""

    upstream = ""
    rewrite_proof = False

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        resp = httpx.get(self.upstream + self.path, timeout=30)
        body = resp.content
        if resp.headers.get("content-type", "").startswith("application/json"):
            doc = json.loads(body)
            _rewrite(doc, self.rewrite_proof)
            body = json.dumps(doc).encode()
        self.send_response(resp.status_code)
        self.send_header("content-type", resp.headers.get("content-type", "text/plain"))
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _rewrite(doc: object, proof_too: bool) -> None:
    import base64

    items = doc.get("items", [doc]) if isinstance(doc, dict) else []
    for item in items:
        if isinstance(item.get("content"), str) and "(proxy)" in item["content"]:
            item["content"] = FORGED
        proof = item.get("proof") if proof_too else None
        for rec in (proof or {}).get("records", []):
            if rec.get("path") == "/content" and rec.get("value"):
                rec["value"] = base64.b64encode(FORGED.encode()).decode()


@pytest.fixture(params=[False, True], ids=["content", "content+proof"])
def proxy(env: Env, request: pytest.FixtureRequest) -> Iterator[str]:
    handler = type("P", (_Proxy,), {"upstream": env.node.api_url,
                                    "rewrite_proof": request.param})
    rng = random.Random()
    for _ in range(100):
        try:
            server = ThreadingHTTPServer(("127.0.0.1", rng.randrange(20000, 32000)), handler)
            break
        except OSError:
            continue
    with serving(server) as url:
        yield url


def test_rewriting_proxy_is_caught_by_verified_reads(env: Env, proxy: str) -> None:
    # Unique text: the auto-voter rejects duplicate content.
    memory = env.committed(f"{HONEST} (proxy) {time.time_ns()}", "vr-proxy")
    with env.sdk(proxy) as ml:
        assert ml.get(memory.id).content == FORGED
        with pytest.raises(ProofError) as err:
            ml.get(memory.id, verify=True)
        assert err.value.reason in ("served_differs", "mismatch")
    with env.sdk() as honest:
        assert honest.get(memory.id, verify=True).content == memory.content
    out = env.cli("get", memory.id, "--verify", api=proxy)
    assert out.returncode == 3 and "verification failed: proof" in out.stderr, out
    out = env.cli("search", "proxy", "--verify", api=proxy)
    assert out.returncode == 3, out
    assert env.cli("search", "proxy", api=proxy).returncode == 0


def test_other_record_kinds_verify(env: Env) -> None:
    memory = env.committed(f"{HONEST} (records) {time.time_ns()}", "vr-records")
    with env.sdk() as ml:
        vals, height = ml.verified_record("validators")
        assert height >= 1 and len(vals["validators"]) == 1
        account, _ = ml.verified_record("account", memory.author)
        assert int(account["nonce"]) > 0
        domain, _ = ml.verified_record("domain", "general")
        assert domain is not None
        content, _ = ml.verified_record("content", memory.id)
        assert content == memory.content
        assert ml.verified_record("domain", "no-such-domain")[0] is None  # proven absent
        assert ml.verified_record("proposal", "p-404")[0] is None


def test_single_record_routes_carry_proofs_on_request(env: Env) -> None:
    from memledger.sdk.light.provider import RestProvider
    from memledger.sdk.light.reads import ReadVerifier

    memory = env.committed(f"{HONEST} (routes) {time.time_ns()}", "vr-routes")
    verifier = ReadVerifier(env.root, RestProvider(env.node.api_url))
    plain = httpx.get(f"{env.node.api_url}/v1/accounts/{memory.author}", timeout=30).json()
    assert "proof" not in plain
    doc = httpx.get(f"{env.node.api_url}/v1/accounts/{memory.author}",
                    params={"prove": "true"}, timeout=30).json()
    value, height = verifier.record(doc["proof"], "/account", memory.author.encode())
    assert value is not None and json.loads(value)["nonce"] >= plain["last_nonce"]
    assert height >= 1
    with pytest.raises(ProofError):  # the proof is for this account only
        verifier.record(doc["proof"], "/account", ("00" * 32).encode())
    missing = httpx.get(f"{env.node.api_url}/v1/proposals/p-404", params={"prove": "true"},
                        timeout=30)
    assert missing.status_code == 404


class _StaleAbsenceProxy(BaseHTTPRequestHandler):
    """Hides one committed memory: a 404, the absence proof taken before it was written
    relabelled as a recent height, and the real old header served for that height."""

    upstream = ""
    memory_id = ""
    old_record: dict[str, object] = {}
    claimed = 0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == f"/v1/memories/{self.memory_id}":
            resp = httpx.get(self.upstream + "/v1/memories/no-such-id-vr", timeout=30)
            self._send(resp.status_code, resp.content.replace(b"no-such-id-vr",
                                                              self.memory_id.encode()))
        elif url.path == "/v1/proofs/memory" and query.get("id") == self.memory_id:
            record = {**self.old_record, "height": self.claimed}
            self._send(200, json.dumps({"kind": "memory", "id": self.memory_id,
                                        "record": record}).encode())
        elif url.path == "/v1/light" and query.get("height") == str(self.claimed + 1):
            old = int(str(self.old_record["height"])) + 1
            resp = httpx.get(self.upstream + "/v1/light", params={"height": str(old)},
                             timeout=30)
            self._send(resp.status_code, resp.content)
        else:
            resp = httpx.get(self.upstream + self.path, timeout=30)
            self._send(resp.status_code, resp.content)

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_old_absence_proof_relabelled_as_recent_is_refused(env: Env, tmp_path: Path) -> None:
    """A node that serves the signed header of height h0+1 when asked for L+1 cannot
    pass off its absence proof from h0 (before the memory was written) as one of L."""
    memory_id = f"vr-stale-{time.time_ns()}"
    old = httpx.get(f"{env.node.api_url}/v1/proofs/memory", params={"id": memory_id},
                    timeout=30).json()["record"]
    with env.sdk() as ml:
        ml.submit(memory_id, f"{HONEST} (stale absence) {time.time_ns()}", tags=["vr-stale"])
        deadline = time.monotonic() + 60
        while ml.get(memory_id).status != "committed":
            assert time.monotonic() < deadline, "auto-voter never committed the memory"
            time.sleep(0.3)
    with env.node.rpc() as rpc:
        while rpc.latest_height() < old["height"] + 6:
            time.sleep(0.3)
        claimed = rpc.latest_height() - 1
    handler = type("P", (_StaleAbsenceProxy,), {"upstream": env.node.api_url,
                                                "memory_id": memory_id, "old_record": old,
                                                "claimed": claimed})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as proxy:
        with Client(proxy, trust=env.root) as victim:
            with pytest.raises(HeaderError) as err:
                victim.get(memory_id, verify=True)
        assert err.value.reason == "wrong_height"
        out = env.cli("get", memory_id, "--verify", "--trust-store",
                      str(tmp_path / "fresh-store.json"), api=proxy)
    assert out.returncode == 3, out
    assert "verification failed: header" in out.stderr and "absent" not in out.stderr, out
