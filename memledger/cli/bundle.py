"""`memledger export`, `verify-bundle` and `import`: verifiable bundles (docs/EXPORT.md)."""

from __future__ import annotations

from pathlib import Path

import click

from memledger.cli.client import (
    check_tags,
    client,
    common,
    emit,
    errors_as_messages,
    fail,
    key_option,
    load_key,
)
from memledger.sdk.light.client import GenesisRoot, PinnedRoot, TrustRoot

STATUSES = ["proposed", "committed", "challenged", "deprecated"]


def trust_options(func: click.decorators.FC) -> click.decorators.FC:
    func = click.option("--genesis", type=click.Path(path_type=Path, dir_okay=False),
                        default=None, help="Trust the genesis validator set of this file "
                                           "(valid while the set is unchanged).")(func)
    func = click.option("--trust", "trust", default=None, metavar="HEIGHT:HASH",
                        help="Trust this header: the bundle's header height and its hash "
                             "(hex), obtained from a source you trust.")(func)
    return func


def trust_root(trust: str | None, genesis: Path | None) -> TrustRoot:
    """--trust HEIGHT:HASH or --genesis FILE (exactly one)."""
    if (trust is None) == (genesis is None):
        raise click.UsageError("give exactly one of --trust HEIGHT:HASH and --genesis FILE")
    if genesis is not None:
        return GenesisRoot.from_file(genesis)
    assert trust is not None
    height, _, hexhash = trust.partition(":")
    try:
        pinned = bytes.fromhex(hexhash)
        at = int(height)
    except ValueError:
        raise click.UsageError("--trust must be HEIGHT:HASH (a number, a colon, hex)") from None
    if len(pinned) != 32 or at < 1:
        raise click.UsageError("--trust must be HEIGHT:HASH with a 32-byte hex hash")
    return PinnedRoot(at, pinned)


@click.command("export")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--domain")
@click.option("--status", type=click.Choice(STATUSES), help="Default: every status.")
@click.option("--type", "type_", type=click.Choice(["fact", "observation", "inference", "task"]))
@click.option("--author", help="Author public key (hex).")
@click.option("--tag", "tags", multiple=True, help="Repeatable; all must match.")
@common
def export_cmd(file: Path, domain: str | None, status: str | None, type_: str | None,
               author: str | None, tags: tuple[str, ...], api: str | None, home: Path,
               as_json: bool) -> None:
    """Write the memories a filter selects, with their proofs, to FILE (JSON Lines).

    Anyone can check FILE offline with `memledger verify-bundle`; the node that made it
    need not be trusted."""
    check_tags(tags)
    with errors_as_messages(), client(api, home) as ml:
        count = ml.export(file, domain=domain, status=status, type=type_, author=author,
                          tags=tags)
    emit({"file": str(file), "memories": count}, as_json,
         f"exported {count} memories to {file}")


@click.command("verify-bundle")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@trust_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def verify_bundle_cmd(file: Path, trust: str | None, genesis: Path | None,
                      as_json: bool) -> None:
    """Verify FILE offline against a trusted header (--trust HEIGHT:HASH) or the chain's
    genesis validators (--genesis); exit 3 naming the first bad line if it fails."""
    from memledger.sdk.bundle import BundleError, verify_bundle
    from memledger.sdk.light.errors import VerificationError

    try:
        root = trust_root(trust, genesis)
        summary = verify_bundle(file, root)
    except (BundleError, VerificationError) as exc:
        fail(f"bundle does not verify: {exc}", 3,
             line=getattr(exc, "line", None), memory_id=getattr(exc, "memory_id", None))
    except OSError as exc:
        fail(str(exc))
    emit(summary, as_json, f"verified {summary.count} memories of chain {summary.chain_id} "
                           f"at height {summary.height} (header {summary.height + 1} "
                           f"{summary.header_hash.upper()})")


@click.command("import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@trust_options
@key_option
@common
def import_cmd(file: Path, trust: str | None, genesis: Path | None, key: str,
               api: str | None, home: Path, as_json: bool) -> None:
    """Verify FILE, then submit its memories to this node's chain signed by --key, each
    keeping its origin (chain, height, id, author) as provenance."""
    from memledger.sdk.bundle import BundleError
    from memledger.sdk.light.errors import VerificationError

    try:
        root = trust_root(trust, genesis)
        with errors_as_messages(), client(api, home, load_key(key)) as ml:
            result = ml.import_bundle(file, root)
    except (BundleError, VerificationError) as exc:
        fail(f"bundle does not verify: {exc}", 3)
    skipped = f", skipped {len(result.skipped)} already on this chain" if result.skipped else ""
    emit({"file": str(file), "submitted": len(result.submitted), "skipped": result.skipped},
         as_json, f"submitted {len(result.submitted)} memories from {file}{skipped}")


def register(group: click.Group) -> None:
    for command in (export_cmd, verify_bundle_cmd, import_cmd):
        group.add_command(command)
