"""Agent key files: generate, save and load Ed25519 identities for the SDK and the CLI.

A key file is JSON holding the 32-byte seed in hex (plus the public key, so a corrupt
file fails loudly on load). Files are created 0600 inside a 0700 directory: the seed is
the agent's whole identity and never leaves the client.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

KEY_FILE_TYPE = "memledger-ed25519"
SEED_BYTES = 32


class KeyFileError(RuntimeError):
    """A key file is missing, malformed, or inconsistent."""


def default_key_dir() -> Path:
    """`$MEMLEDGER_KEYS_DIR`, else ~/.memledger/keys."""
    env = os.environ.get("MEMLEDGER_KEYS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".memledger" / "keys"


def key_path(name_or_path: str | os.PathLike[str], key_dir: Path | None = None) -> Path:
    """A bare name means `<key dir>/<name>.json`; anything path-like is used as given."""
    text = os.fspath(name_or_path)
    if os.sep in text or text.endswith(".json") or text.startswith("."):
        return Path(text).expanduser()
    return (key_dir or default_key_dir()) / f"{text}.json"


def make_private_dirs(path: Path) -> None:
    """Create ``path`` and every missing parent for its owner only (0700).

    ``mkdir(parents=True, mode=0o700)`` gives the mode to the last directory alone: the
    key dir's parent, the node home (~/.memledger) when `keys new` runs before `init`,
    would be left 0755 for good (`init` keeps an existing home's mode).
    """
    missing: list[Path] = []
    while not path.exists() and path.parent != path:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)


@dataclass(frozen=True)
class Agent:
    """One signing identity. The identity on the ledger is `public_key_hex`."""

    signing_key: SigningKey
    name: str = ""

    @classmethod
    def generate(cls, name: str = "") -> Agent:
        return cls(SigningKey.generate(), name)

    @classmethod
    def from_seed(cls, seed: bytes, name: str = "") -> Agent:
        if len(seed) != SEED_BYTES:
            raise KeyFileError(f"seed must be {SEED_BYTES} bytes, got {len(seed)}")
        return cls(SigningKey(seed), name)

    @property
    def public_key(self) -> bytes:
        return bytes(self.signing_key.verify_key)

    @property
    def public_key_hex(self) -> str:
        return self.public_key.hex()

    @property
    def seed(self) -> bytes:
        return bytes(self.signing_key)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": KEY_FILE_TYPE,
            "name": self.name,
            "seed": self.seed.hex(),
            "public_key": self.public_key_hex,
        }

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the key file with 0600 permissions (never world-readable, even briefly)."""
        target = Path(path).expanduser()
        make_private_dirs(target.parent)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
        try:
            fd = os.open(target, flags, 0o600)
        except FileExistsError:
            raise KeyFileError(f"{target} already exists (refusing to overwrite a key)") from None
        with os.fdopen(fd, "w") as fh:
            json.dump(self.to_json(), fh, indent=2)
            fh.write("\n")
        os.chmod(target, 0o600)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Agent:
        target = Path(path).expanduser()
        try:
            data = json.loads(target.read_text())
        except FileNotFoundError:
            raise KeyFileError(f"no key file at {target} (create one with "
                               f"`memledger keys new {target.stem}`)") from None
        except (OSError, ValueError) as exc:
            raise KeyFileError(f"cannot read key file {target}: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("seed"), str):
            raise KeyFileError(f"{target} is not a memledger key file (no seed)")
        try:
            seed = bytes.fromhex(data["seed"])
        except ValueError:
            raise KeyFileError(f"{target}: seed is not hex") from None
        agent = cls.from_seed(seed, str(data.get("name") or target.stem))
        expected = data.get("public_key")
        if expected is not None and expected != agent.public_key_hex:
            raise KeyFileError(f"{target}: public key does not match the seed")
        return agent


def key_names(key_dir: Path | None = None) -> list[str]:
    """The names of the key files in the key dir, sorted (none if it does not exist)."""
    directory = key_dir or default_key_dir()
    try:
        return sorted(path.stem for path in directory.glob("*.json") if path.is_file())
    except OSError:
        return []


def missing_key(name: str, key_dir: Path | None = None) -> str:
    """Why key ``name`` did not load, for a caller who likely mistyped it: the keys that
    do exist (and the closest to ``name``), and how to make a new one."""
    directory = key_dir or default_key_dir()
    names = key_names(directory)
    if not names:
        return (f"no key named {name!r}: the keys dir {directory} holds no keys yet; "
                f"create one with `memledger keys new {name}`")
    close = difflib.get_close_matches(name, names, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"no key named {name!r} in {directory}{guess}; keys there: {', '.join(names)}; "
            "create a new key with `memledger keys new NAME`")


def load_agent(name_or_path: str | os.PathLike[str], key_dir: Path | None = None) -> Agent:
    """Load by bare name (from the key dir) or by path. A bare name with no file is
    answered with the names there are: it is most often a typo, not a key to create."""
    path = key_path(name_or_path, key_dir)
    text = os.fspath(name_or_path)
    if path.stem == text and not path.exists():
        raise KeyFileError(missing_key(text, key_dir))
    return Agent.load(path)
