"""The built wheel, installed into a clean virtualenv, runs `teleclaude demo` from a folder far from the
source tree: the package ships its commands, templates and hooks, and needs nothing from this checkout. The
suite's one run of the whole demo: it delivers its roadmap and leaves neither its repository nor its tmux
server behind."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from teleclaude.adapters.tmux import Tmux

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_in_a_clean_venv_runs_the_demo_from_any_folder_leaving_no_tmux_server_behind(tmp_path):
    source = tmp_path / "source"  # a copy of the tracked files: setuptools builds in the tree it is given
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = (tmp_path / "dist").glob("teleclaude-*.whl")
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-compile", str(wheel)], check=True, timeout=300)
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    [installed] = site.glob("teleclaude-*.dist-info")
    # Its dependencies: what the wheel's metadata requires, and what they require in turn, hard-linked in from
    # the test's own environment (pip resolving and unpacking them again took ~15 s of CPU, all of it pip's
    # work; a symbolic link would lead the demo's sandboxed workers nowhere where this checkout is under /tmp
    # or the home, which their sandbox hides); nothing else is there, and pip checks that what is there
    # satisfies every requirement.
    for top in sorted(_tops(metadata.PathDistribution(installed).requires or [])):
        if top.is_dir():
            shutil.copytree(top, site / top.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(top, site / top.name)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT") and k != "PYTHONPATH"}
    # this checkout is not on the path (one that holds no teleclaude, such as scripts/year-ahead's, may be)
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and not is_checkout(p)]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    env["TMPDIR"] = str(elsewhere)
    located = subprocess.run(
        [python, "-c", "import teleclaude; print(teleclaude.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(located.stdout.strip()).is_relative_to(venv)  # the installed copy, not this checkout
    demo = subprocess.run(
        [str(venv / "bin" / "teleclaude"), "demo"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert list(elsewhere.iterdir()) == []  # the demo's throwaway repository is gone
    shown = re.search(r"tmux -L (tc-demo-[0-9a-f]+)", demo.stdout)  # and its tmux server, with its socket
    assert shown, demo.stdout
    assert Tmux(shown[1]).session_names() == set()
    assert not Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", shown[1]).exists()


def _tops(requires: list[str]) -> set[Path]:
    """The top-level files and folders (packages, modules, `.dist-info`) of the distributions `requires`
    names, with their extras, and of everything they require in turn, as this environment holds them."""
    tops: set[Path] = set()
    wanted = [(Requirement(line), "") for line in requires]
    seen: set[str] = set()
    while wanted:
        requirement, extra = wanted.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        dist = metadata.distribution(requirement.name)
        for each in ("", *requirement.extras):
            if f"{dist.name}[{each}]".lower() not in seen:
                seen.add(f"{dist.name}[{each}]".lower())
                wanted += [(Requirement(line), each) for line in dist.requires or []]
        assert dist.files is not None, f"{dist.name} lists no files"
        tops |= {
            Path(str(dist.locate_file(file.parts[0])))
            for file in dist.files
            if file.parts[0] not in ("..", "__pycache__")
        }
    return tops


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    """A hard link where both are on one file system, else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def is_checkout(path: str) -> bool:
    return Path(path, "teleclaude").is_dir()
