"""The methods `dataclasses` writes for teleclaude's classes, compiled once rather than in every process.

For every dataclass, `dataclasses` writes `__init__`, `__repr__`, `__eq__`, `__hash__` (and for a frozen one
`__setattr__` and `__delattr__`) as source text and compiles it with `exec`: about 0.3 ms a class, and a
planner call defines about thirty. `install()` (run by `teleclaude/__init__.py`) gives the `dataclasses`
module an `exec` that, for a class of a `teleclaude` module, looks the text up in a table of code compiled
before. The table is kept beside the package's bytecode, as a `.pyc` is: `__pycache__/dataclass-methods.
<python tag>.marshal`. It is written only where bytecode may be written, replaced atomically, read only when
it starts with this Python's bytecode magic number, and safe to delete. The text itself is the key, so the
code run is exactly what `exec(text)` would compile; a class that changed simply compiles again.

`dataclasses` (with `inspect`, which it imports) costs as much as Python's own start: a process that defines
no dataclass must not pay for it, so `install()` gives the module its `exec` as it is imported (lazy.py).
`dataclasses` imports `inspect` (with `ast`, `dis`, `tokenize`: more than `dataclasses` itself) only to write
the signature of a class without a docstring into one: it gets a stand-in (`_inspect`) that gives a class of
teleclaude's its bare name for a docstring and imports `inspect` for anyone else's.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys

from teleclaude.lazy import when_imported

TYPE_CHECKING = False  # typing's own, without importing typing (a few ms)
if TYPE_CHECKING:
    from types import CodeType, ModuleType
    from typing import Any

PREFIX = "teleclaude"  # only the classes of these modules: other packages' dataclasses are left alone
MAX_ENTRIES = 2_000  # past this, a table grown by old versions of the classes starts afresh

_compiled: dict[str, CodeType] = {}
_added = False


def install() -> None:
    """Route `dataclasses`' `exec` through the table (once per process; a no-op where it cannot be): now,
    when `dataclasses` is imported already, else as it is imported (`lazy.when_imported`)."""
    if not _waiting:
        _waiting.append(True)
        when_imported("dataclasses", _route, stand_in=_inspect())


_waiting: list[bool] = []


def _route(dataclasses: ModuleType) -> None:
    if vars(dataclasses).get("exec") is _exec:
        return
    if "exec" in vars(dataclasses):  # someone else's: leave it
        return
    _compiled.update(_load(_path()))
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    import atexit

    atexit.register(save)


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    if isinstance(source, str):
        # As `exec(source)` in `dataclasses` compiles it: without this module's `__future__` flags, which a
        # plain `exec` here would pass on (every other package's dataclasses would get string annotations).
        if isinstance(globals, dict) and _ours(globals.get("__name__")):
            code = _compiled.get(source)
            if code is None:
                global _added
                code = _compiled[source] = compile(source, "<string>", "exec", dont_inherit=True)
                _added = True
            source = code
        else:
            source = compile(source, "<string>", "exec", dont_inherit=True)
    builtins.exec(source, globals, locals)


def _inspect() -> ModuleType:
    """`inspect` as `dataclasses` uses it: `signature` refused for teleclaude's classes (which dataclasses
    takes as "no signature": the class's name is its docstring), anything else from the real module."""
    stand_in = type(sys)("inspect")  # a module (types.ModuleType, without importing `types`: a hook's cost)

    def real() -> ModuleType:
        if sys.modules.get("inspect") is stand_in:
            del sys.modules["inspect"]
        from importlib import import_module

        return import_module("inspect")

    def signature(thing: Any, *args: Any, **kwargs: Any) -> Any:
        if _ours(getattr(thing, "__module__", None)):
            raise ValueError("no signature in the docstring of a teleclaude class")
        return real().signature(thing, *args, **kwargs)

    stand_in.signature = signature  # type: ignore[attr-defined]
    stand_in.__getattr__ = lambda name: getattr(real(), name)  # type: ignore[method-assign]  # PEP 562
    return stand_in


def _ours(module: object) -> bool:
    return isinstance(module, str) and (module == PREFIX or module.startswith(PREFIX + "."))


def save() -> None:
    """Write the table when this process compiled something new (run at exit)."""
    global _added
    path = _path()
    if not _added or path is None or sys.dont_write_bytecode:
        return
    _added = False
    from pathlib import Path

    from teleclaude.adapters import fs  # imported (its classes compiled) before the table is taken

    table = dict(list(_compiled.items())[-MAX_ENTRIES:])
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        mode = os.stat(__file__).st_mode & 0o666  # as a `.pyc`: readable by whoever reads the source
        fs.atomic_write(Path(path), _magic() + marshal.dumps(table), follow=False, mode=mode)
    except OSError:  # a read-only install: compile every time, as without the table
        pass


def _load(path: str | None) -> dict[str, CodeType]:
    from types import CodeType

    if path is None:
        return {}
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return {}
    magic = _magic()
    if not data.startswith(magic):
        return {}
    try:
        table = marshal.loads(data[len(magic) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _path() -> str | None:
    return beside_bytecode("dataclass-methods", ".marshal")


def beside_bytecode(name: str, suffix: str) -> str | None:
    """A file of the package's kept beside its bytecode, as a `.pyc` is: `__pycache__/NAME.<tag>SUFFIX`;
    None for an interpreter without a bytecode cache tag."""
    from importlib.util import cache_from_source

    try:
        pyc = cache_from_source(os.path.join(os.path.dirname(__file__), f"{name}.py"))
    except NotImplementedError:
        return None
    return pyc.removesuffix(".pyc") + suffix


def _magic() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER
