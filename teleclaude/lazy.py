"""Set a module up as it is first imported, by whoever imports it, rather than importing it to set it up.

`dataclasses` (the method table, methodcache.py) and `logging` (the CLI's format) each cost about as much as
Python's own start; a process that never uses them (`teleclaude --version`, a hook with nothing to record)
must not pay for them. `when_imported(name, then)` calls `then(module)` at once when the module is imported
already; else a finder first on `sys.meta_path` finds the module as the finders after it would, and calls
`then` once the module has run, before its importer sees it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing's own, without importing typing (a few ms)
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any


def when_imported(name: str, then: Callable[[ModuleType], None], stand_in: ModuleType | None = None) -> None:
    """`then(module)` once `name` is imported; while it first runs, `import {stand_in.__name__}` in it (and
    in what it imports) gives `stand_in`, unless that module is imported already."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    else:
        sys.meta_path.insert(0, _Finder(name, then, stand_in))


class _Finder:
    def __init__(
        self, name: str, then: Callable[[ModuleType], None], stand_in: ModuleType | None = None
    ) -> None:
        self.name, self.then, self.stand_in = name, then, stand_in

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        run, then, stand_in = getattr(spec.loader, "exec_module", None), self.then, self.stand_in
        if run is None:
            return spec

        def exec_module(module: ModuleType) -> None:
            placed = stand_in if stand_in is not None and stand_in.__name__ not in sys.modules else None
            if placed is not None:
                sys.modules[placed.__name__] = placed
            try:
                run(module)
            finally:
                if placed is not None and sys.modules.get(placed.__name__) is placed:
                    del sys.modules[placed.__name__]
            then(module)

        spec.loader.exec_module = exec_module  # the loader of this spec alone
        return spec
