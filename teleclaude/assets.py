"""The files teleclaude ships beside its code: role prompts (`commands/`), file templates (`templates/`) and
git hook scripts (`hooks/`).

They live at the top of the repository; the wheel carries them inside the `teleclaude` package (see
`pyproject.toml`). A source checkout or an editable install finds them beside the package instead.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

KINDS = ("commands", "templates", "hooks")


def folder(kind: str) -> Traversable:
    """The shipped folder `kind` (one of `KINDS`)."""
    packaged = resources.files("teleclaude").joinpath(kind)
    if packaged.is_dir():
        return packaged
    return Path(str(resources.files("teleclaude"))).parent / kind


def read_text(kind: str, name: str) -> str:
    return folder(kind).joinpath(name).read_text(encoding="utf-8")
