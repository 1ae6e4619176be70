"""Fault campaigns against a local test net: nemeses, a recorded workload, a checker.

    python -m memledger.devtools.chaos.campaign --short OUT_DIR

P2P links go through Toxiproxy (one proxy per ordered pair of nodes, PEX off), so a
partition, latency or a flaky link is a proxy toggle or toxic; packet loss is an nftables
rule on the proxy's port; pauses, kills and a full disk act on the node's processes and
home. The workload records every client operation (history.py); the checker (checker.py)
judges the history and every node's final state. docs/CHAOS.md says what each part proves.
"""
