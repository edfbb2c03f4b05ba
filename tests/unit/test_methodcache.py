"""The compiled dataclass methods kept between processes: same values, written only where bytecode is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import dataclasses; from teleclaude.planner.core.model import TaskItem, Roadmap; "
    "a = TaskItem(3, ' ', 'alpha', 0); b = dataclasses.replace(a); "
    "print(repr(a), a == b, hash(a) == hash(b), Roadmap() == Roadmap(), TaskItem.__doc__ is not None)\n"
    "try:\n a.line = 4\nexcept dataclasses.FrozenInstanceError:\n print('frozen')"
)
EXPECTED = "TaskItem(line=3, mark=' ', text='alpha', depth=0) True True True True\nfrozen\n"


def probe(prefix: Path, write_bytecode: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(prefix), PYTHONPATH=str(ROOT))
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def tables(prefix: Path) -> list[Path]:
    return sorted(prefix.rglob("dataclass-methods.*.marshal"))


def test_the_table_is_written_once_and_gives_the_same_classes(tmp_path: Path) -> None:
    assert probe(tmp_path) == EXPECTED
    [table] = tables(tmp_path)
    written = table.stat().st_mtime_ns
    assert probe(tmp_path) == EXPECTED  # read back: nothing new to compile, so nothing written
    assert table.stat().st_mtime_ns == written


def test_a_damaged_table_is_ignored_and_replaced(tmp_path: Path) -> None:
    probe(tmp_path)
    [table] = tables(tmp_path)
    for damage in (b"", b"not a table", table.read_bytes()[:40]):
        table.write_bytes(damage)
        assert probe(tmp_path) == EXPECTED
        assert table.read_bytes() != damage


def test_nothing_is_written_where_bytecode_is_not(tmp_path: Path) -> None:
    assert probe(tmp_path, write_bytecode=False) == EXPECTED
    assert tables(tmp_path) == []


def test_other_packages_dataclasses_keep_their_real_annotations(tmp_path: Path) -> None:
    """teleclaude routes `dataclasses`' exec; a dataclass of someone else's keeps its typed `__init__`."""
    code = (
        "import teleclaude, dataclasses, typing\n"
        "@dataclasses.dataclass\nclass Point:\n x: int\n"
        "print(typing.get_type_hints(Point.__init__))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'x': <class 'int'>, 'return': <class 'NoneType'>}"


def test_dataclasses_imports_inspect_only_for_another_package_s_class(tmp_path: Path) -> None:
    """`inspect` costs more than `dataclasses`, which uses it only to write a docstring-less class's signature
    into its docstring: not for teleclaude's classes; for anyone else's as before, and `import inspect` is the
    real module."""
    code = (
        "import sys, teleclaude, dataclasses\n"
        "from teleclaude.planner.core.model import Heading, Roadmap\n"
        "print('inspect' in sys.modules, Heading.__doc__, Roadmap().open_items())\n"
        "@dataclasses.dataclass\nclass Point:\n x: int\n"
        "import inspect\n"
        "print('inspect' in sys.modules, Point.__doc__, inspect.signature(Heading), inspect.getmodule(Point))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "False Heading ()",
        "True Point(x: int) (level: 'int', text: 'str') -> None <module '__main__' (built-in)>",
    ]
