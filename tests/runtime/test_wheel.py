"""The built wheel, installed into a clean virtualenv, runs `teleclaude demo` from a folder far from the
source tree: the package ships its commands, templates and hooks, and needs nothing from this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# read before the tests' own HOME replaces the user's: pip's cache of the dependencies' wheels, which the
# clean virtualenv then installs without downloading them again (it still installs all of them)
PIP_CACHE = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")


def test_the_wheel_in_a_clean_venv_runs_the_demo_from_any_folder(tmp_path):
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
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
        env={**os.environ, "PIP_CACHE_DIR": PIP_CACHE},
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT") and k != "PYTHONPATH"}
    # this checkout is not on the path (one that holds no teleclaude, such as scripts/year-ahead's, may be)
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and not is_checkout(p)]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    env["TMPDIR"] = str(elsewhere)
    located = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import teleclaude; print(teleclaude.__file__)"],
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


def is_checkout(path: str) -> bool:
    return Path(path, "teleclaude").is_dir()
