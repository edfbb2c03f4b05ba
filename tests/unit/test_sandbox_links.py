"""What links lead to, in a worker's sandbox (runtime/core/sandbox.py `_shown`, through `bwrap_argv`): every
path is mounted where its links lead (bubblewrap cannot make a mount point through a link), a link whose
place the sandbox empties is made again inside, a link to the home or to `/` shows nothing, and a link never
widens what is writable. The links themselves are found by adapters/sandbox.py `links_on_the_way`."""

from __future__ import annotations

import os

import pytest

from teleclaude.adapters.sandbox_reach import links_on_the_way
from teleclaude.runtime.core.sandbox import Layout, bwrap_argv, resolve

from .test_sandbox import last_mount, mounts

HOME = "/home/u"
PROJECT = "/tmp/c/project"  # a checkout under /tmp, shown read-only in the sandbox's own /tmp
TREE = f"{PROJECT}/trees/feat"
CLIS = "/srv/cache/agent-clis"  # what its .cache/agent-clis links to: shown anyway (the system is)
PYENV = f"{HOME}/.pyenv/versions/3.11.7"
LINKS = {
    f"{PROJECT}/.cache/agent-clis": CLIS,  # the link is in the project: shown as it is
    f"{HOME}/.local/bin": f"{HOME}/dotfiles/bin",  # its place is in the emptied home: made again
    "/opt/venv/bin/python": f"{PYENV}/bin/python3.11",  # leads into the home: the home's side is bound
    f"{PROJECT}/hidden-tools": "/tmp/tools",  # leads into the sandbox's /tmp: bound there
    "/tmp/to-home": HOME,
    "/tmp/to-root": "/",
    f"{HOME}/.claude": f"{HOME}/dotfiles/claude",  # a dotfiles-linked state folder: writable where it leads
    f"{HOME}/.codex": HOME,  # a state folder linked to the home: not shown
    f"{HOME}/.gemini": PROJECT,  # …or to the project, kept read-only: not shown
    f"{HOME}/.config/opencode": "/etc/opencode",  # …or into the system, read-only: not shown
    f"{HOME}/.local/share/opencode": f"{PROJECT}/state",  # …or into the project: not shown
    f"{HOME}/.cache/opencode": "/tmp/cache/opencode",  # into the sandbox's own /tmp: shown there
}


def argv(readonly: tuple[str, ...] = (), writable: tuple[str, ...] = ()) -> list[str]:
    layout = Layout(
        workdir=TREE,
        homes=(HOME,),
        readonly=(PROJECT, *readonly),
        writable=(TREE, *writable),
        links=tuple(LINKS.items()),
    )
    return bwrap_argv("bwrap", layout, ["x"])


def made(built: list[str]) -> dict[str, str]:
    """The links made inside: {place: target}."""
    return {built[i + 2]: built[i + 1] for i, arg in enumerate(built) if arg == "--symlink"}


@pytest.mark.parametrize(
    ("named", "bound"),
    [
        # a read-only folder: mounted where it leads, when the sandbox hides that (the system is shown)
        (f"{PROJECT}/.cache/agent-clis/node_modules/.bin", None),
        (f"{HOME}/.local/bin", f"{HOME}/dotfiles/bin"),
        ("/opt/venv/bin/python", f"{PYENV}/bin/python3.11"),
        (f"{PROJECT}/hidden-tools/bin", "/tmp/tools/bin"),
        (f"{HOME}/.nvm/versions/node/v22/bin", f"{HOME}/.nvm/versions/node/v22/bin"),  # no link: as it is
        # a link to the home or to / shows nothing (what is needed beneath it is named by itself)
        ("/tmp/to-home", None),
        ("/tmp/to-root", None),
        (HOME, None),  # the home itself on PATH
    ],
)
def test_a_read_only_path_is_bound_where_its_links_lead_and_never_a_home_or_a_folder_holding_one(
    named, bound
):
    built = argv(readonly=(named,))
    binds = {path for flag, path in mounts(built) if flag in ("--ro-bind", "--bind")} - {"/", PROJECT, TREE}
    assert binds == ({bound} if bound else set())
    assert last_mount(built, f"{HOME}/.ssh/id_ed25519") == "--tmpfs"


@pytest.mark.parametrize(
    ("state", "writable_at"),
    [
        (f"{HOME}/.claude", f"{HOME}/dotfiles/claude"),  # a dotfiles-linked folder: its target, writable
        (f"{HOME}/.codex", None),  # linked to the home: refused
        (f"{HOME}/.gemini", None),  # linked to the read-only project: refused
        (f"{HOME}/.config/opencode", None),  # linked into the read-only system: refused
        (f"{HOME}/.local/share/opencode", None),  # linked into the read-only project: refused
        (f"{HOME}/.cache/opencode", "/tmp/cache/opencode"),
        (f"{HOME}/.opencode", f"{HOME}/.opencode"),  # no link: as it is
    ],
)
def test_a_writable_folder_reached_through_a_link_is_bound_where_it_leads_only_when_that_widens_nothing(
    state, writable_at
):
    built = argv(writable=(state,))
    writable = {path for flag, path in mounts(built) if flag == "--bind"} - {TREE}
    assert writable == ({writable_at} if writable_at else set())
    assert last_mount(built, f"{HOME}/.ssh/id_ed25519") == "--tmpfs"
    assert last_mount(built, f"{PROJECT}/README.md") == "--ro-bind"


CONFIG = f"{HOME}/.config/teleclaude"  # the user's teleclaude.toml: shown read-only


@pytest.mark.parametrize(
    ("target", "shown_files", "protected"),
    [
        (CONFIG, ((f"{CONFIG}/teleclaude.toml", f"{CONFIG}/teleclaude.toml"),), ()),
        (f"{HOME}/.config", ((f"{CONFIG}/teleclaude.toml", f"{CONFIG}/teleclaude.toml"),), ()),  # holds it
        # the trusted-settings file is shown from beside the database at the home's own place
        (f"{HOME}/db", ((f"{HOME}/db/trusted.json", f"{HOME}/.teleclaude/trusted.json"),), ()),
        (f"{HOME}/gitdir", (), (f"{HOME}/gitdir/refs/heads/main",)),  # a path kept read-only again
    ],
)
def test_a_writable_folder_linked_to_what_is_kept_read_only_is_not_shown(target, shown_files, protected):
    """A state folder a user linked to ~/.config/teleclaude (or to a folder holding a file the sandbox
    shows read-only, or a protected path): the folder is not made writable, so nothing new can be written
    beside the file (a notify.toml) and the file's folder stays the sandbox's empty one."""
    layout = Layout(
        workdir=TREE,
        homes=(HOME,),
        readonly=(PROJECT,),
        writable=(TREE, f"{HOME}/.gemini"),
        protected=protected,
        shown_files=shown_files,
        links=((f"{HOME}/.gemini", target),),
    )
    built = bwrap_argv("bwrap", layout, ["x"])
    assert {path for flag, path in mounts(built) if flag == "--bind"} == {TREE}
    assert last_mount(built, f"{target}/notify.toml") == "--tmpfs"


def test_the_links_are_made_again_only_where_the_sandbox_empties_their_place_before_the_home_is_read_only():
    built = argv(readonly=(f"{HOME}/.local/bin",))
    assert made(built) == {
        f"{HOME}/.local/bin": f"{HOME}/dotfiles/bin",
        "/tmp/to-home": HOME,
        "/tmp/to-root": "/",
        f"{HOME}/.claude": f"{HOME}/dotfiles/claude",
        f"{HOME}/.codex": HOME,
        f"{HOME}/.gemini": PROJECT,
        f"{HOME}/.config/opencode": "/etc/opencode",
        f"{HOME}/.local/share/opencode": f"{PROJECT}/state",
        f"{HOME}/.cache/opencode": "/tmp/cache/opencode",
    }  # the project's own links are shown with it; /opt is the system's
    order = mounts(built)
    made_at = order.index(("--symlink", f"{HOME}/.local/bin"))
    assert order.index(("--ro-bind", f"{HOME}/dotfiles/bin")) < made_at < order.index(("--remount-ro", HOME))


def test_a_home_that_is_a_link_is_emptied_where_it_leads():
    layout = Layout(workdir="/w", homes=("/home/u",), links=(("/home", "/data/home"),))
    built = bwrap_argv("bwrap", layout, ["x"])
    assert ("--tmpfs", "/data/home/u") in mounts(built) and ("--remount-ro", "/data/home/u") in mounts(built)
    assert last_mount(built, "/data/home/u/.ssh/id_ed25519") == "--tmpfs"


@pytest.mark.parametrize(
    ("path", "real"),
    [
        (f"{PROJECT}/.cache/agent-clis/node_modules/.bin/claude", f"{CLIS}/node_modules/.bin/claude"),
        (f"{PROJECT}/.cache/agent-clis/../x", f"{CLIS.rsplit('/', 1)[0]}/x"),  # `..` after a link: its parent
        (f"{PROJECT}/./README.md", f"{PROJECT}/README.md"),
        ("/", "/"),
    ],
)
def test_a_path_resolves_as_the_kernel_follows_it(path, real):
    assert resolve(path, LINKS) == real


def test_the_links_on_the_way_are_found_hop_by_hop(tmp_path):
    """Each link met, the ones its targets pass through too (a chain through a folder the sandbox hides
    must be made again there, hop by hop), each with where it leads, resolved."""
    real = tmp_path / "pyenv" / "versions" / "3.11.7" / "bin"
    real.mkdir(parents=True)
    (real / "python3.11").write_text("")
    (tmp_path / "pyenv" / "versions" / "3.11").symlink_to("3.11.7")  # an alias, relative
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(tmp_path / "pyenv" / "versions" / "3.11" / "bin" / "python3.11")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    found = links_on_the_way([str(venv / "python"), str(tmp_path / "loop" / "x"), str(tmp_path / "gone")])
    assert found[str(venv / "python")] == str(real / "python3.11")
    assert found[str(tmp_path / "pyenv" / "versions" / "3.11")] == str(real.parent)
    assert found[str(tmp_path / "gone")] == str(tmp_path / "nowhere")
    assert str(tmp_path / "loop") in found  # followed at most as far as the kernel would
    assert resolve(str(venv / "python"), found) == os.path.realpath(venv / "python")


def test_a_clis_interpreter_is_shown_with_its_venv_and_the_install_its_python_links_into(tmp_path):
    """A script naming a venv's Python on its first line (as pip's do; through `env` too): the venv as named
    and the Python's install behind its link; a folder that is no venv is not taken for one."""
    from teleclaude.adapters.sandbox_reach import installs

    base = tmp_path / "pyenv" / "versions" / "3.11.7"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_text("")
    (base / "bin" / "python3.11").chmod(0o755)  # found on PATH
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\n")
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    tools = tmp_path / "local" / "bin"
    tools.mkdir(parents=True)
    (tools / "python").symlink_to(base / "bin" / "python3.11")
    for first_line, path, named in (
        (f"#!{venv}/bin/python", "/usr/bin", venv),
        ("#!/usr/bin/env python", f"{venv}/bin", venv),
        ("#!/usr/bin/env python", str(tools), None),
    ):
        script = tmp_path / "cli" / "bin" / "tool"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(f"{first_line}\n")
        found = installs(str(script), path)
        assert base in found and (named in found if named else tools.parent not in found), first_line


def test_a_protected_path_whose_link_leads_out_of_what_is_writable_shows_nothing_where_it_leads():
    """A path kept read-only inside what is writable (a worktree's `.git`), made a link to a secret by
    whoever could write there: nothing of it is protected there, and the secret stays hidden."""
    layout = Layout(
        workdir=TREE,
        homes=(HOME,),
        readonly=(PROJECT,),
        writable=(TREE,),
        protected=(f"{TREE}/.git", f"{TREE}/kept"),
        links=((f"{TREE}/.git", f"{HOME}/.ssh/id_ed25519"),),
    )
    built = bwrap_argv("bwrap", layout, ["x"])
    assert last_mount(built, f"{HOME}/.ssh/id_ed25519") == "--tmpfs"
    assert last_mount(built, f"{TREE}/kept") == "--ro-bind"  # one without a link: read-only there


def test_a_read_only_path_with_dots_that_leads_to_the_home_shows_nothing_with_no_link_on_any_way():
    """A PATH folder written with `..` (`~/bin/..`) is the home: not shown, whether or not any path of the
    layout has a link on its way."""
    for links in ((), ((f"{HOME}/.claude", f"{HOME}/dotfiles/claude"),)):
        layout = Layout(workdir=TREE, homes=(HOME,), readonly=(f"{HOME}/bin/..",), links=links)
        built = bwrap_argv("bwrap", layout, ["x"])
        assert not [path for flag, path in mounts(built) if "bind" in flag and os.path.normpath(path) == HOME]
