"""The core stays pure: no I/O libraries imported by anything under teleclaude/core."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "teleclaude" / "core"
FORBIDDEN = {"git", "sqlite3", "sqlite_utils", "libtmux", "fastmcp", "mcp", "subprocess", "os", "socket"}
ALLOWED_PACKAGES = {"teleclaude", "mistune", "__future__"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_imports_no_io_library():
    offenders = {
        f"{path.name}: {name}"
        for path in CORE.glob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in FORBIDDEN
    }
    assert offenders == set()


def test_core_depends_only_on_stdlib_mistune_and_itself():
    import sys

    stdlib = set(sys.stdlib_module_names)
    third_party = {
        name.split(".")[0]
        for path in CORE.glob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] not in stdlib
    }
    assert third_party <= ALLOWED_PACKAGES
