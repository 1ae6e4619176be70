"""Generate memledger/protocol/pb/*_pb2.py(+.pyi) from proto/memledger/*.proto with the
pinned grpc_tools.

Usage: python scripts/gen_proto.py [--check]

The generated modules are committed (so a plain install needs no protoc). ``--check`` regenerates
into a temp dir and fails if the committed copies differ, so a schema edit cannot silently ship
without its generated code. protoc runs with ``-I proto`` so descriptors are registered under the
unique names ``memledger/abci.proto``/``memledger/tx.proto``; the output is then flattened into
the ``memledger.protocol.pb`` package and module references are rewritten to match.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_PKG = "memledger"  # directory under proto/ holding our .proto files
SOURCES = ("abci.proto", "tx.proto")
OUT_DIR = ROOT / "memledger" / "protocol" / "pb"
TARGET_PKG = "memledger.protocol.pb"
INIT_TEXT = '"""Generated protobuf modules; regenerate with `python scripts/gen_proto.py`."""\n'


def _protoc(out: Path) -> None:
    """Run grpc_tools' bundled protoc; keeps the generator version pinned by the venv."""
    from grpc_tools import protoc  # imported lazily: only needed when generating

    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        *(str(PROTO_ROOT / PROTO_PKG / name) for name in SOURCES),
    ]
    rc = protoc.main(args)
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")


def _fix_module_refs(text: str) -> str:
    """Point `memledger.X_pb2` references at the flat `memledger.protocol.pb.X_pb2`
    modules."""
    text = re.sub(
        rf"^from {PROTO_PKG} import (\w+_pb2)",
        rf"from {TARGET_PKG} import \1",
        text,
        flags=re.MULTILINE,
    )
    return re.sub(rf"'{PROTO_PKG}\.(\w+_pb2)'", rf"'{TARGET_PKG}.\1'", text)


def generate(out_dir: Path) -> list[str]:
    """Write the package into out_dir (created if missing); return the file names written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = ["__init__.py"]
    (out_dir / "__init__.py").write_text(INIT_TEXT)
    with tempfile.TemporaryDirectory() as raw:
        _protoc(Path(raw))
        for path in sorted((Path(raw) / PROTO_PKG).iterdir()):
            (out_dir / path.name).write_text(_fix_module_refs(path.read_text()))
            written.append(path.name)
    return written


def check(committed_dir: Path = OUT_DIR) -> int:
    """Return 0 if the files in committed_dir equal a fresh generation, else 1 (and say why)."""
    with tempfile.TemporaryDirectory() as raw:
        fresh_dir = Path(raw) / "_pb"
        names = generate(fresh_dir)
        problems = []
        for name in names:
            committed = committed_dir / name
            if not committed.exists():
                problems.append(f"missing: {committed}")
            elif committed.read_bytes() != (fresh_dir / name).read_bytes():
                problems.append(f"stale: {committed}")
        for extra in sorted(committed_dir.glob("*_pb2.py*")):
            if extra.name not in names:
                problems.append(f"unexpected: {extra}")
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print("generated code is out of date: run `python scripts/gen_proto.py`", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate protocol/pb from proto/memledger.")
    parser.add_argument("--check", action="store_true", help="verify committed files are fresh")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    for name in generate(OUT_DIR):
        print(f"wrote {(OUT_DIR / name).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
