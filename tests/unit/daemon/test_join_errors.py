"""Joining a net asks it everything before writing anything: a net that answers the
genesis but not the trust point leaves the new home untouched, with one clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger.daemon import join as join_module


class _AnsweringGenesis:
    """cometbft's RPC as far as genesis and status; the trust point then fails."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def __enter__(self) -> _AnsweringGenesis:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def call(self, method: str) -> dict[str, Any]:
        assert method == "genesis"
        return {"genesis": {"chain_id": "joined-net"}}

    def status(self) -> dict[str, Any]:
        return {"node_info": {"id": "ab" * 20, "listen_addr": "tcp://0.0.0.0:26656"}}


def test_a_failed_trust_point_leaves_the_home_untouched(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    def no_trust_point(url: str) -> tuple[int, str]:
        raise httpx.ConnectError("connection refused")

    monkeypatch.setattr(join_module, "RpcClient", _AnsweringGenesis)
    monkeypatch.setattr(join_module.cometbft, "trust_point", no_trust_point)
    home = tmp_path / "cometbft"
    (home / "config").mkdir(parents=True)
    with pytest.raises(join_module.JoinError, match="trust point .*connection refused"):
        join_module.join(home, "http://127.0.0.1:9")
    assert list((home / "config").iterdir()) == []  # no genesis, no config edits
