"""The dependency rules of docs/architecture.md, checked on the source with `ast`.

- Pure modules (every `*/core/*.py`, `teleclaude/agents/*.py`, `teleclaude/config/*.py`,
  `teleclaude/errors.py`) import only the standard library, mistune and other pure modules.
- The agent drivers (`teleclaude/agents/`) are the ground floor: they import nothing of teleclaude else.
- Adapters (`teleclaude/adapters/*`) import only pure modules and other adapters of teleclaude.
- The planner never imports the runtime, setup, the front ends or the demo, neither directly nor through the
  modules it imports (an import runs the packages above the module too); the one way in is the session
  records' pure values, read through `adapters/sessions_db.py`.
- No wing imports a front end (`teleclaude.cli`, `teleclaude.mcp`, its stdio door `teleclaude.mcp_answers`).
- No `_private` name is imported from, or read on, another teleclaude module.
- pyproject's `packages` list is exactly the package folders.
- An agent CLI is named (as a word) in at most five modules outside the demo: its driver, the registry, the
  default matrix and little else; everything else asks the driver.
- No module is over 600 lines: a room that grows past it is split into rooms a reader can name.

Every import counts, also one inside a function or under `if TYPE_CHECKING:`. The last tests plant each kind
of violation in a throwaway tree and check that it is reported, so a rule cannot pass by reading nothing.
"""

from __future__ import annotations

import ast
import functools
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the stdlib's own SHA-256 is `_sha256` up to Python 3.11, `_sha2` from 3.12 (core/marks.py imports either)
STDLIB = set(sys.stdlib_module_names) | {"__future__", "_sha256", "_sha2"}
PURE_THIRD_PARTY = {"mistune"}
# board.web serves the board over HTTP behind mcp's own Host, Origin and token checks: a front door too
FRONT_ENDS = (
    "teleclaude.cli",
    "teleclaude.mcp",
    "teleclaude.mcp_answers",
    "teleclaude.__main__",
    "teleclaude.board.web",
)
NOT_FOR_THE_PLANNER = ("teleclaude.runtime", "teleclaude.setup", *FRONT_ENDS, "teleclaude.demo")


# the planner reads the sessions database through this adapter, which speaks the runtime's session values
SESSIONS_DOOR = "teleclaude.adapters.sessions_db"


def within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def is_pure(module: str) -> bool:
    parts = module.split(".")
    return (
        "core" in parts[1:-1]
        or parts[-1] == "core"
        or within(module, ("teleclaude.agents", "teleclaude.config", "teleclaude.errors"))
    )


class Source:
    """The teleclaude modules of one tree: name -> parsed file."""

    def __init__(self, root: Path) -> None:
        self.trees: dict[str, ast.Module] = {}
        self._imports: dict[str, list[tuple[int, str, list[str]]]] = {}  # the planner's chains ask again
        for path in sorted((root / "teleclaude").rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            self.trees[name] = ast.parse(path.read_text(), str(path))

    def imports(self, module: str) -> list[tuple[int, str, list[str]]]:
        """(line, imported module, names imported from it) for every import in `module`; `from package
        import submodule` counts as an import of the submodule."""
        if module in self._imports:
            return self._imports[module]
        found = self._imports[module] = []
        for node in ast.walk(self.trees[module]):
            if isinstance(node, ast.Import):
                found += [(node.lineno, alias.name, []) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(module, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.append(
                        (node.lineno, sub, []) if sub in self.trees else (node.lineno, base, [alias.name])
                    )
        return found

    def _absolute(self, module: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = module.split(".")[: -node.level] if module in self.trees else []
        return ".".join([*package, *([node.module] if node.module else [])])

    def module_aliases(self, module: str) -> dict[str, str]:
        """Names in `module` bound to a teleclaude module (`from teleclaude.adapters import git as gitx`)."""
        aliases: dict[str, str] = {}
        for node in ast.walk(self.trees[module]):
            if isinstance(node, ast.Import):
                aliases |= {alias.asname: alias.name for alias in node.names if alias.asname}
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(module, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in self.trees:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
        return {name: target for name, target in aliases.items() if target.startswith("teleclaude")}


@functools.cache
def parsed(root: Path) -> Source:
    """The tree at `root`, parsed once for every test that reads it."""
    return Source(root)


def loaded_with(module: str) -> list[str]:
    """What importing `module` runs: the packages above it, then the module itself."""
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts) + 1)]


def planner_detours(source: Source) -> list[str]:
    """Each planner module that reaches a module the planner may not use through modules it may: the chain
    that gets there, found breadth-first (a direct import is the rule above's to report)."""
    found = []
    for start in (name for name in source.trees if within(name, ("teleclaude.planner",))):
        chains = {start: [start]}
        queue = [start]
        while queue:
            module = queue.pop(0)
            for line, imported, _ in source.imports(module):
                for step in loaded_with(imported):
                    if step in chains or step not in source.trees:
                        continue
                    chains[step] = [*chains[module], f"{step} (line {line} of {module})"]
                    if not within(step, NOT_FOR_THE_PLANNER):
                        queue.append(step)
                        continue
                    if module == SESSIONS_DOOR and (step == "teleclaude.runtime" or is_pure(step)):
                        continue  # the session records' values, the one way in
                    if module != start:
                        found.append(" -> ".join(chains[step]) + ", but the planner needs no runtime, …")
                    break  # the package's own modules are further down the same chain
    return found


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def violations(root: Path) -> list[str]:
    """Every broken rule in the tree at `root`, as `module:line: what`."""
    source = parsed(root)
    found = []
    for module in source.trees:
        for line, imported, names in source.imports(module):
            top = imported.split(".")[0]
            ours = top == "teleclaude"
            where = f"{module}:{line}: imports {imported}"
            if is_pure(module) and not (is_pure(imported) if ours else top in STDLIB | PURE_THIRD_PARTY):
                found.append(f"{where}, but a pure module imports only stdlib, mistune and pure modules")
            adapters = ("teleclaude.adapters",)
            if within(module, adapters) and ours and not (is_pure(imported) or within(imported, adapters)):
                found.append(f"{where}, but an adapter imports only pure modules and adapters")
            if within(module, ("teleclaude.planner",)) and within(imported, NOT_FOR_THE_PLANNER):
                found.append(f"{where}, but the planner needs no runtime, setup, front end or demo")
            drivers = ("teleclaude.agents",)
            if within(module, drivers) and ours and not within(imported, drivers):
                found.append(f"{where}, but an agent driver imports nothing of teleclaude else")
            if not within(module, FRONT_ENDS) and within(imported, FRONT_ENDS):
                found.append(f"{where}, but only a front end imports a front end")
            if ours and imported != module:
                found += [f"{where}: private {name}" for name in names if is_private(name)]
        aliases = source.module_aliases(module)
        for node in ast.walk(source.trees[module]):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and is_private(node.attr):
                target = aliases.get(node.value.id)
                if target and target != module:
                    found.append(f"{module}:{node.lineno}: reads private {target}.{node.attr}")
    return found + planner_detours(source)


def package_folders(root: Path) -> set[str]:
    return {
        ".".join(init.parent.relative_to(root).parts) for init in (root / "teleclaude").rglob("__init__.py")
    }


# --- the rules, on this repository ------------------------------------------------------------------


def test_the_source_keeps_the_dependency_rules():
    assert violations(ROOT) == []


def test_pyproject_lists_every_package_and_only_those():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped_folders = setuptools["package-dir"]  # commands/, templates/, hooks/ at the top of the repository
    assert all((ROOT / folder).is_dir() for folder in shipped_folders.values())
    assert set(setuptools["packages"]) == package_folders(ROOT) | set(shipped_folders)
    assert len(setuptools["packages"]) == len(set(setuptools["packages"]))


def test_each_agent_cli_is_named_in_few_modules():
    import re

    from teleclaude.agents import NAMES

    sources = {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for path in (ROOT / "teleclaude").rglob("*.py")
        if "demo" not in path.relative_to(ROOT / "teleclaude").parts
    }
    for name in NAMES:
        naming = sorted(path for path, text in sources.items() if re.search(rf"\b{name}\b", text))
        assert f"teleclaude/agents/{name}.py" in naming
        assert len(naming) <= 5, f"{name} is named in {naming}: ask its driver instead"


MAX_LINES = 600


def test_no_module_is_over_600_lines():
    lengths = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "teleclaude").rglob("*.py")
    }
    assert len(lengths) > 50  # the whole tree was read
    assert {path: size for path, size in lengths.items() if size > MAX_LINES} == {}


def test_the_rules_see_the_whole_tree():
    source = parsed(ROOT)
    pure = [name for name in source.trees if is_pure(name)]
    assert "teleclaude.planner.core.decide" in pure and "teleclaude.runtime.core.sessions" in pure
    assert "teleclaude.config.parse" in pure and "teleclaude.errors" in pure
    assert not is_pure("teleclaude.planner.api") and not is_pure("teleclaude.adapters.git")


# --- the checker reports what it must (planted violations) ------------------------------------------


def plant(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in {"__init__.py": "", **files}.items():
        path = tmp_path / "teleclaude" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in path.relative_to(tmp_path).parents:
            if folder.parts:
                (tmp_path / folder / "__init__.py").touch()
        path.write_text(text)
    return violations(tmp_path)


def test_a_core_module_importing_an_adapter_is_reported(tmp_path):
    found = plant(
        tmp_path, {"planner/core/decide.py": "import teleclaude.adapters.git\n", "adapters/git.py": ""}
    )
    assert found == [
        "teleclaude.planner.core.decide:1: imports teleclaude.adapters.git, "
        "but a pure module imports only stdlib, mistune and pure modules"
    ]


def test_every_kind_of_violation_is_reported(tmp_path):
    files = {
        "planner/core/model.py": "def helper():\n    import sqlite_utils\n",  # inside a function: still seen
        "config/parse.py": "from teleclaude.planner import api\n",
        "errors.py": "from teleclaude.adapters import fs\n",
        "adapters/fs.py": "from teleclaude.planner.api import run\nfrom teleclaude.errors import Error\n",
        "planner/api.py": "from teleclaude.runtime import tmux\nfrom teleclaude.planner.core import plan\n",
        "runtime/tmux.py": "from teleclaude.cli import base\n",
        "cli/base.py": "from teleclaude.planner.core.render import _utc\n",
        "planner/core/render.py": "def _utc(): pass\n",
        "demo/scenario.py": "from teleclaude.planner import api as app\napp._memo\n",
    }
    found = "\n".join(plant(tmp_path, files))
    assert "planner.core.model:2: imports sqlite_utils" in found
    assert "config.parse:1: imports teleclaude.planner.api, but a pure module" in found
    assert "errors:1: imports teleclaude.adapters.fs, but a pure module" in found
    assert "adapters.fs:1: imports teleclaude.planner.api, but an adapter" in found
    assert "adapters.fs:2" not in found
    assert "planner.api:1: imports teleclaude.runtime.tmux, but the planner" in found
    assert "planner.api:2" not in found
    assert "runtime.tmux:1: imports teleclaude.cli.base, but only a front end" in found
    assert "cli.base:1: imports teleclaude.planner.core.render: private _utc" in found
    assert "demo.scenario:2: reads private teleclaude.planner.api._memo" in found
    assert len(found.splitlines()) == 8


def test_the_planner_reaching_the_runtime_through_another_module_is_reported(tmp_path):
    files = {
        "planner/core/decide.py": "from teleclaude.config import profiles\n",
        "config/profiles.py": "from teleclaude.agents.claude import PROFILE\n",
        "agents/claude.py": "from teleclaude.runtime.core.limits import PATTERNS\n",
        "runtime/core/limits.py": "PATTERNS = ()\n",
    }
    found = plant(tmp_path, files)
    assert len(found) == 2, found
    assert found[0].startswith("teleclaude.agents.claude:1: imports teleclaude.runtime.core.limits, but an")
    # the chain names each import on the way, down to the first runtime module run (its package)
    assert found[1] == (
        "teleclaude.planner.core.decide"
        " -> teleclaude.config.profiles (line 1 of teleclaude.planner.core.decide)"
        " -> teleclaude.agents.claude (line 1 of teleclaude.config.profiles)"
        " -> teleclaude.runtime (line 1 of teleclaude.agents.claude), but the planner needs no runtime, …"
    )


def test_a_package_missing_from_pyproject_is_seen(tmp_path):
    plant(tmp_path, {"newwing/__init__.py": "", "planner/core/__init__.py": ""})
    assert package_folders(tmp_path) == {
        "teleclaude",
        "teleclaude.newwing",
        "teleclaude.planner",
        "teleclaude.planner.core",
    }
