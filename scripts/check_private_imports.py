"""Fail when a memledger module uses another memledger module's private names.

Usage: python scripts/check_private_imports.py [ROOT]   (ROOT: the directory holding the
``memledger`` package; the repository by default)

A leading underscore says "this module's business": a name used from elsewhere is shared
and gets a public name in its module. Two forms are caught, in every ``.py`` under
``memledger/`` except the exempt paths below:

- ``from memledger.x import _name`` (relative imports too), and
- ``module._name``, where ``module`` is bound to a memledger module by an import.

Dunder names (``__version__``) are not private. ``self._x`` and ``SomeClass._x`` are
not module access and are not checked. Tests, benchmarks and scripts are not checked:
a test may reach inside what it tests.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "memledger"

# Paths (relative to ROOT, "/"-separated prefixes) left unchecked: none. Kept as a knob
# so a large move can land in steps; an entry here is debt to pay back.
EXEMPT: tuple[str, ...] = ()


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


class Modules:
    """Which dotted names are memledger modules (files or packages) under ROOT."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def exists(self, dotted: str) -> bool:
        if dotted != PACKAGE and not dotted.startswith(PACKAGE + "."):
            return False
        base = self.root.joinpath(*dotted.split("."))
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_from(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative ones resolved against `current`)."""
    if not node.level:
        return node.module or ""
    parts = current.split(".")
    if not is_package:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def dotted(expr: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None for anything but names and attributes."""
    names: list[str] = []
    while isinstance(expr, ast.Attribute):
        names.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    names.append(expr.id)
    return names[::-1]


def check_file(root: Path, path: Path, modules: Modules) -> Iterator[Violation]:
    rel = path.relative_to(root).as_posix()
    current = module_name(root, path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    # local name -> the memledger module it is bound to, from any import in the file
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not modules.exists(alias.name):
                    continue
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    bound[head] = head
        elif isinstance(node, ast.ImportFrom):
            source = resolve_from(current, path.name == "__init__.py", node)
            if not modules.exists(source):
                continue
            for alias in node.names:
                if is_private(alias.name) and source != current:
                    yield Violation(rel, node.lineno,
                                    f"from {source} import {alias.name}")
                elif modules.exists(f"{source}.{alias.name}"):
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not is_private(node.attr):
            continue
        chain = dotted(node.value)
        if chain is None or chain[0] not in bound:
            continue
        target = ".".join([bound[chain[0]], *chain[1:]])
        if modules.exists(target) and target != current:
            yield Violation(rel, node.lineno, f"{'.'.join(chain)}.{node.attr} "
                                              f"(private to {target})")


def check(root: Path, exempt: tuple[str, ...] = EXEMPT) -> list[Violation]:
    modules = Modules(root)
    found: list[Violation] = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(rel.startswith(prefix) for prefix in exempt):
            continue
        found.extend(check_file(root, path, modules))
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    if not (root / PACKAGE).is_dir():
        print(f"no {PACKAGE} package under {root}", file=sys.stderr)
        return 2
    found = check(root)
    for violation in found:
        print(violation)
    if found:
        print(f"{len(found)} use(s) of another module's private names: give each a public "
              "name in its module (scripts/check_private_imports.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
