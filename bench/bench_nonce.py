"""One agent key, many concurrent writers: committed/s before (v2) and after (v3) the
nonce window, on a real single node through the REST API and the SDK.

For each app version and each writer count W (1, 8, 64): W threads submit memories under
ONE key with wait="sync" (one shared SDK nonce source), then we wait until the mempool is
empty and count the acknowledged memories the node really stored. The limit, measured in
the same run on the same node: W threads each with its OWN key (no nonce contention). The
figure of merit is the ratio one-key / own-keys committed/s (1.0 = one key costs nothing);
`lost` counts acknowledged writes that never committed.

    .venv/bin/python -m bench.bench_nonce [--writers 1 8 64] [--submits 1000]
        [--validators 4] [--versions 3]

With `--validators 4` the writers spread over four validators' REST APIs, where the REST
API's per-signer backlog limit (docs/RULES.md, Nonces) shapes what one key can do.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from memledger.devtools.burst import missing, run_burst, wait_mempool_empty
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import Testnet


def _start(root: Path, app_version: int, validators: int) -> Testnet:
    net = Testnet.create(root, validators, chain_id=f"bench-nonce-v{app_version}",
                         voter=False, app_state={"app_version": app_version})
    for node in net.nodes:
        config = node.node_home.load()
        config.extra["api_rate_limit_per_s"] = "0"  # one client host sends everything
        node.node_home.save(config)
    net.up(api=True, voter=False)
    for node in net.nodes:
        _wait_api(node.api_url)
    return net


def _wait_api(url: str, timeout: float = 60.0) -> None:
    import httpx

    wait_until(lambda: httpx.get(f"{url}/ready", timeout=2.0).status_code == 200, timeout, 0.2,
               what=f"{url}/ready", ignore=(httpx.HTTPError,))


def _measure(net: Testnet, key: SigningKey | None, writers: int, submits: int,
             label: str) -> dict[str, Any]:
    """One burst spread over every node's REST API; lost = acknowledged, absent on node 0."""
    node = net.node(0)
    started = time.monotonic()
    report = run_burst([n.api_url for n in net.nodes], key, writers=writers, total=submits,
                       label=label)
    for each in net.nodes:
        wait_mempool_empty(each.rpc_url)
    drained = time.monotonic() - started
    acknowledged = list(report.acknowledged)
    lost = len(missing(node.api_url, acknowledged))
    committed = len(acknowledged) - lost
    return {"submitted": submits, "acknowledged": len(acknowledged), "refused": report.refused,
            "lost": lost, "committed": committed, "seconds": round(drained, 2),
            "committed_per_s": round(committed / drained, 1)}


def run(writer_counts: list[int], submits: int, validators: int = 1,
        versions: tuple[int, ...] = (2, 3)) -> dict[str, Any]:
    out: dict[str, Any] = {"submits": submits, "validators": validators, "versions": {}}
    for version in versions:
        with tempfile.TemporaryDirectory() as tmp:
            net = _start(Path(tmp) / "net", version, validators)
            try:
                rows: dict[str, Any] = {}
                for writers in writer_counts:
                    one = _measure(net, SigningKey.generate(), writers, submits,
                                   f"v{version}-one-{writers}")
                    own = _measure(net, None, writers, submits, f"v{version}-own-{writers}")
                    rows[f"{writers}-writers"] = {
                        "one_key": one, "own_keys": own,
                        "ratio": round(one["committed_per_s"] / own["committed_per_s"], 3),
                    }
                out["versions"][f"v{version}"] = rows
            finally:
                net.down()
                for node in net.nodes:
                    node.kill()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--submits", type=int, default=1000)
    parser.add_argument("--validators", type=int, default=1,
                        help="validators in the test net; writers spread over their APIs")
    parser.add_argument("--versions", type=int, nargs="+", default=[2, 3])
    args = parser.parse_args()
    print(json.dumps(run(args.writers, args.submits, args.validators, tuple(args.versions)),
                     indent=2))


if __name__ == "__main__":
    main()
