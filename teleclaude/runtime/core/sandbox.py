"""A worker's sandbox as bubblewrap's command line (pure: the paths come in, the argv goes out).

The worker sees the system read-only, a private /tmp and /dev/shm, an empty home folder with only its CLI's
own state in it, the project read-only and its worktree and the git data its commits need read-write; what
the launcher names `hidden` (the user's agent sockets, the workers' tmux socket) is an empty folder. It has
its own PID, IPC and host-name namespaces (it cannot signal `teleclaude run` or another worker), no
capabilities, and the network unless it is closed. adapters/sandbox.py finds the paths and probes bwrap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import PurePosixPath

from teleclaude.config.profiles import SandboxMode

# variables that lead out of the sandbox: the user's agents (ssh, gpg, the desktop bus) and the workers' tmux;
# the sessions database (hidden: a sandboxed worker's hooks use its channel, its teleclaude finds the user's
# trusted settings where they are shown to it)
UNSET = (
    "TELECLAUDE_DB",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "TMUX",
    "TMUX_PANE",
)


class Boxing(Enum):
    """Whether a worker starts in its sandbox, by `[runtime] sandbox` and whether bubblewrap works there."""

    INSIDE = "inside"
    OFF = "off"  # the sandbox is off: as it is
    UNSANDBOXED = "unsandboxed"  # "auto" where bubblewrap does not work: as it is, and the user is told
    REFUSED = "refused"  # "bwrap" where bubblewrap does not work: no worker starts


def boxing(mode: SandboxMode, usable: bool) -> Boxing:
    """The one switch of `[runtime] sandbox`, for a worker here and one on another computer (`usable`: what
    the probe there found; nothing is probed when the sandbox is off, pass False)."""
    if mode is SandboxMode.OFF:
        return Boxing.OFF
    if usable:
        return Boxing.INSIDE
    return Boxing.UNSANDBOXED if mode is SandboxMode.AUTO else Boxing.REFUSED


@dataclass(frozen=True)
class Layout:
    """Every path a worker's sandbox is made of (absolute; each exists, except `writable_files`)."""

    workdir: str  # where the CLI starts
    homes: tuple[str, ...]  # $HOME (and the user's own home folder): empty folders
    hidden: tuple[str, ...] = ()  # empty folders too: /run/user/UID, the tmux socket's folder
    readonly: tuple[str, ...] = ()  # shown read-only inside what is hidden: the project, the CLI's install
    writable: tuple[str, ...] = ()  # read-write: the worktree, the git data its commits need, the CLI's state
    writable_files: tuple[str, ...] = ()  # read-write when they exist (a CLI's state file)
    protected: tuple[str, ...] = ()  # read-only again inside what is writable: main's ref, .git links
    # (outside, inside): read-write, shown at another place (a worker's own branch folder as refs/heads)
    moved: tuple[tuple[str, str], ...] = ()
    shown_files: tuple[tuple[str, str], ...] = ()  # (outside, inside): read-only when they exist
    env: Mapping[str, str] = field(default_factory=dict)  # set inside only
    network: bool = True
    # every link met on the way to the paths above: (its place, its folder resolved; where it leads, resolved)
    links: tuple[tuple[str, str], ...] = ()


def resolve(path: str, links: Mapping[str, str]) -> str:
    """`path` as the kernel follows it, each link on its way replaced by where it leads (`links`, a link's
    place to its target, as `Layout.links`); a link not in `links` is taken for a folder."""
    plain = "/./" not in f"{path}/" and "/../" not in f"{path}/"
    if plain and not any(_inside(path, (place,)) for place in links):  # (most paths: no link on the way)
        return path
    at = "/"
    for part in PurePosixPath(path).parts[1:]:
        if part == "..":
            at = str(PurePosixPath(at).parent)
        elif part != ".":
            here = str(PurePosixPath(at, part))
            at = links.get(here, here)
    return at


@dataclass(frozen=True)
class _Shown:
    """A layout's paths where bubblewrap mounts them: resolved (it cannot make a mount point through a
    link), what may not be shown left out, and the links that lead to them made again where the sandbox
    hides their place."""

    homes: list[str]
    hidden: list[str]
    binds: list[tuple[str, str, str]]  # (source, target, flag)
    protected: list[str]
    shown_files: list[tuple[str, str]]
    links: list[tuple[str, str]]  # (place, target): made inside


def _shown(layout: Layout) -> _Shown:
    """The decisions on links. A read-only path is bound where it leads, when that is in what the sandbox
    hides (the homes, their hidden folders, /tmp; the rest of the system is shown read-only anyway) and is not
    itself such a folder or one holding one (a link to `~` or `/` shows nothing: only what is needed beneath
    it, found by itself). A writable path reached through a link is bound where it leads only when that is
    a place the sandbox would show nothing of, holding nothing it hides or keeps read-only
    (`_writable_there`): a link never widens what is writable."""
    links = dict(layout.links)

    def real(path: str) -> str:  # (`..` taken out too when no path has a link on its way)
        return resolve(path, links)

    homes = _outer_first(tuple(real(p) for p in layout.homes))
    hidden = _outer_first(tuple(real(p) for p in layout.hidden))
    covered = (*homes, *hidden, "/tmp")
    readonly = [real(p) for p in layout.readonly]
    # what a link never makes writable: what is shown read-only, the files shown (both sides) and the
    # paths kept read-only again (a state folder linked to ~/.config/teleclaude)
    files = [real(p) for pair in layout.shown_files for p in pair]
    kept = (*readonly, *files, *(real(p) for p in layout.protected))
    binds = [(p, "--ro-bind") for p in readonly if _inside(p, covered) and not _holds(p, covered)]
    for paths, flag in ((layout.writable, "--bind"), (layout.writable_files, "--bind-try")):
        for path in paths:
            target = real(path)
            if target == path or _writable_there(target, covered, kept):
                binds.append((target, flag))
    placed = [(path, path, flag) for path, flag in _unique(binds)]
    placed += [(source, real(target), "--bind") for source, target in layout.moved]
    # read-only again inside what is writable; one whose links lead out of it protects nothing there, and
    # bound where it leads it would show what the sandbox hides (a `.git` linked to ~/.ssh/id_ed25519)
    writable = tuple(target for _, target, flag in placed if flag != "--ro-bind")
    protected = [p for p in (real(p) for p in layout.protected) if _inside(p, writable)]
    bound = tuple(target for _, target, _ in placed) + tuple(protected)
    made = [(place, target) for place, target in links.items() if _hidden_at(place, covered, bound)]
    return _Shown(
        homes=homes,
        hidden=hidden,
        binds=sorted(placed, key=lambda bind: _depth(bind[1])),
        protected=_outer_first(tuple(protected)),
        shown_files=[(source, real(target)) for source, target in layout.shown_files],
        links=sorted(made, key=lambda link: _depth(link[0])),
    )


def bwrap_argv(bwrap: str, layout: Layout, argv: list[str]) -> list[str]:
    """`argv` started inside the sandbox `layout` describes. The binds go outer before inner (a worktree
    inside the read-only project is writable), the protected ones last; every path where its links lead
    (`_shown`)."""
    shown = _shown(layout)
    out = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL"]
    if not layout.network:
        out.append("--unshare-net")
    out += ["--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc"]
    out += ["--tmpfs", "/tmp"]
    for path in _outer_first((*shown.homes, *shown.hidden)):
        out += ["--tmpfs", path]
    for source, target, flag in shown.binds:
        out += [flag, source, target]
    for path in shown.protected:
        out += ["--ro-bind", path, path]
    for source, target in shown.shown_files:
        out += ["--ro-bind-try", source, target]
    for place, target in shown.links:
        out += ["--symlink", target, place]
    for path in shown.homes:  # only what is bound inside stays writable
        out += ["--remount-ro", path]
    for name in UNSET:
        out += ["--unsetenv", name]
    for name, value in layout.env.items():
        out += ["--setenv", name, value]
    return [*out, "--chdir", layout.workdir, "--", *argv]


def _depth(path: str) -> int:
    return len(PurePosixPath(path).parts)


def _outer_first(paths: tuple[str, ...]) -> list[str]:
    return sorted(dict.fromkeys(paths), key=_depth)


def _holds(path: str, folders: tuple[str, ...]) -> bool:
    """`path` is one of `folders` or a folder above one."""
    return any(_inside(folder, (path,)) for folder in folders)


def _writable_there(target: str, covered: tuple[str, ...], kept: tuple[str, ...]) -> bool:
    """A writable path's link may lead to `target`: a place the sandbox would show nothing of (in a home,
    its /tmp, a hidden folder), in nothing it keeps read-only (the project, an install, a file it shows, a
    protected path) and holding none of them (the system, shown read-only, never becomes writable through a
    link)."""
    inside = _inside(target, covered) and not _inside(target, kept)
    return inside and not _holds(target, (*covered, *kept))


def _hidden_at(place: str, covered: tuple[str, ...], bound: tuple[str, ...]) -> bool:
    """Nothing shows `place` inside: it is in an emptied folder and in no bind (each made after them)."""
    return _inside(place, covered) and not _inside(place, bound)


def _unique(binds: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """One bind a path; the writable one wins over the read-only one of the same path."""
    chosen: dict[str, str] = {}
    for path, flag in binds:
        if chosen.get(path) != "--bind":
            chosen[path] = flag
    return list(chosen.items())


# bubblewrap's own refusal to make the sandbox for a path not there ("Can't bind mount SOURCE on DEST: ...",
# "Can't find source path ...: No such file or directory"), matched without spaces: tmux wraps a long path
_UNMADE = re.compile(r"bwrap:Can't\S*?/refs/heads/\S*?:Nosuchfileordirectory")


def raced(rows: list[str]) -> bool:
    """bubblewrap stopped before the CLI ran, a path of its layout gone as it made the sandbox: another item's
    branch removed there meanwhile, whose ref it showed read-only (`shown_files`: `--ro-bind-try`, skipped
    once it is gone, so the same start again makes it); another path gone is no race: a start again would
    fail the same. `rows`: the pane's last rows, wrapped as they come."""
    return bool(_UNMADE.search("".join("".join(rows).split())))


# how a CLI says a path it needs is not there or not writable (node, python, a shell, rust)
_DENIED = (
    re.compile(r"\b(?:EROFS|ENOENT|EACCES|EPERM)\b[^'\"\n]*['\"](/[^'\"\n]+)['\"]"),
    re.compile(r"\[Errno (?:2|13|30)\][^'\n]*'(/[^'\n]+)'"),
    re.compile(r"(/[^\s:'\"]+): (?:Read-only file system|No such file or directory|Permission denied)"),
    re.compile(
        r"cannot create (/[^\s:]+): (?:Read-only file system|Directory nonexistent|Permission denied)"
    ),
)


def denied_path(rows: list[str]) -> str | None:
    """The path a CLI that stopped inside its sandbox says it could not open (the last one it names)."""
    for row in reversed(rows):
        for pattern in _DENIED:
            found = pattern.findall(row)
            if found:
                return str(found[-1])
    return None


def blocked_text(agent: str, path: str, output: str) -> str:
    return (
        f"{agent} stopped inside its sandbox: it could not open {path}, which the sandbox hides or keeps "
        f'read-only.\npath="{path}"\nIts last output:\n{output}\nIf {agent} needs it, its driver\'s '
        f"SandboxNeeds (teleclaude/agents/{agent}.py) lacks it: report it; meanwhile set "
        '[runtime] sandbox = "off" in ~/.config/teleclaude/teleclaude.toml.'
    )


# --- a worker on another computer ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteHost:
    """What a computer's probe found there (adapters/remote_sandbox.py): its paths, not this machine's."""

    home: str  # the ssh login's HOME
    user_home: str = ""  # the user's own home folder there, when it is another
    hidden: tuple[str, ...] = ()  # existing folders to empty: /run/user/UID, the workers' tmux socket's
    installs: tuple[str, ...] = ()  # existing folders: the CLIs, their packages, PATH's, teleclaude's
    settings: str = ""  # the user's teleclaude.toml there ("": none)
    links: tuple[tuple[str, str], ...] = ()  # the links on the way to the paths above, as `Layout.links`


@dataclass(frozen=True)
class RemoteTree:
    """An item's worktree in the computer's clone, and the git data its commits need (absolute paths)."""

    workdir: str
    root: str  # the clone's main checkout
    admin: str  # the worktree's admin folder (.git/worktrees/NAME)
    common: str  # the clone's git directory
    lock: str  # the project lock file
    others: tuple[str, ...] = ()  # every other branch's ref file (and reflog), main's among them
    logs: str = ""  # logs/refs/heads, when there is one


def remote_layout(
    host: RemoteHost,
    tree: RemoteTree,
    *,
    state: tuple[str, ...],
    state_files: tuple[str, ...],
    channel: str,
    env: Mapping[str, str],
    network: bool,
) -> Layout:
    """The sandbox of a worker in an item's worktree on another computer, from that computer's paths: as a
    worker's here (adapters/sandbox.py `worker_layout`) with its CLI's state folders `state` under its HOME
    there, and the channel folder its hooks leave their marks in (relayed to its pane there)."""
    homes = tuple(dict.fromkeys(p for p in (host.home, host.user_home) if p))
    writable = [tree.workdir, channel, tree.admin, f"{tree.common}/objects", f"{tree.common}/refs/heads"]
    writable += [tree.lock, *([tree.logs] if tree.logs else [])]
    writable += [str(PurePosixPath(host.home, folder)) for folder in state]
    protected = [f"{tree.workdir}/.git", f"{tree.admin}/commondir", f"{tree.admin}/gitdir"]
    return Layout(
        workdir=tree.workdir,
        homes=homes,
        hidden=host.hidden,
        readonly=(tree.root, *host.installs),
        writable=tuple(writable),
        writable_files=tuple(str(PurePosixPath(host.home, name)) for name in state_files),
        protected=tuple(protected),
        # the other branches read-only when they are still there (one delivered meanwhile is removed there)
        shown_files=tuple((p, p) for p in (*tree.others, *([host.settings] if host.settings else ()))),
        env=dict(env),
        network=network,
        links=host.links,
    )


def _inside(path: str, folders: tuple[str, ...]) -> bool:
    """`path` is one of `folders` or in one (compared as written: the paths are absolute and normalized)."""
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)
