"""Bubblewrap on this machine: is it usable (`probe`), the paths of one worker's sandbox (`worker_layout`,
for runtime/core/sandbox.py), and the per-session channel folder a sandboxed worker's hooks write their
sealed marks into (`write_mark`; the observer reads them with `read_marks`)."""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path

from teleclaude.adapters import channel, fs
from teleclaude.adapters import git as gitx
from teleclaude.adapters import sandbox_branch as given
from teleclaude.adapters import sandbox_reach as reach
from teleclaude.agents.profile import SandboxNeeds
from teleclaude.config.profiles import RuntimeConfig, SandboxMode
from teleclaude.runtime.core.sandbox import Layout

CHANNEL = "TELECLAUDE_CHANNEL"  # a sandboxed worker's channel folder, in its environment
PROBE_TIMEOUT = 10.0
FIX = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0), or set "
    '[runtime] sandbox = "off" in ~/.config/teleclaude/teleclaude.toml.'
)


@dataclass(frozen=True)
class Probe:
    bwrap: str  # its path ("" when not found)
    problem: str  # "" when it works here, else why not (its own words)

    @property
    def usable(self) -> bool:
        return bool(self.bwrap) and not self.problem


def probe(env: Mapping[str, str]) -> Probe:
    """Whether bubblewrap starts a sandbox here as it would a worker's (new PID namespace, /proc)."""
    found = shutil.which("bwrap", path=env.get("PATH")) or shutil.which("bwrap", path="/usr/bin:/bin")
    if not found:
        return Probe("", "bwrap is not installed")
    return Probe(found, _try(found))


@functools.cache
def _try(bwrap: str) -> str:
    argv = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--cap-drop", "ALL", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{bwrap} could not be run: {error}"
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        return f"{bwrap} cannot make a sandbox here: {why[-1] if why else f'exit status {done.returncode}'}"
    return ""


def status_line(config: RuntimeConfig, env: Mapping[str, str]) -> str:
    """One line for `run`'s log and `status`: whether workers here start sandboxed, and if not, the fix."""
    if config.sandbox is SandboxMode.OFF:
        return 'workers are not sandboxed ([runtime] sandbox = "off")'
    found = probe(env)
    if found.usable:
        network = "" if config.sandbox_network else ", without network"
        return f"workers start sandboxed in bubblewrap ({found.bwrap}{network})"
    if config.sandbox is SandboxMode.BWRAP:
        return f'ERROR: SANDBOX_UNAVAILABLE: {found.problem}; [runtime] sandbox = "bwrap" starts no worker'
    return f"WARNING: workers are not sandboxed: {found.problem}. {FIX}"


# --- one worker's paths ------------------------------------------------------------------------------------


def worker_layout(
    *,
    workdir: Path,
    project: Path,
    home: str,
    needs: SandboxNeeds,
    binary: str,
    path: str,
    channel: Path,
    tmux_folder: str,
    merges: bool,
    network: bool,
    env: Mapping[str, str] | None = None,
) -> Layout:
    """The sandbox of a worker in `workdir` (an item's worktree, or the main checkout) of `project`.

    `merges`: its step commits on main (the finalizer, a worker on the main checkout): the main checkout and
    the whole git directory are writable for it. Else only the worktree and, of the git directory, the
    objects, its own branch (refs/heads is a folder of its own with that branch and main's read-only), its
    worktree's admin folder and the project lock."""
    homes = tuple(dict.fromkeys(p for p in (home, _user_home()) if p and Path(p).is_dir()))
    hidden = tuple(p for p in (f"/run/user/{os.getuid()}", tmux_folder, _agent_folder()) if p and _dir(p))
    repo = gitx.find_repo(project)
    writable: list[Path] = [workdir, channel]
    protected: list[Path] = []
    moved: list[tuple[Path, Path]] = []
    if merges or workdir == repo.root:
        writable += [repo.root, repo.common_dir]
    else:
        writable_git, protected, moved = _worktree_git(repo, workdir)
        writable += writable_git
    for folder in needs.state:
        target = Path(home, folder)
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        writable.append(target)
    readonly = [repo.root, *reach.installs(binary, path)]
    shown, inside_env = _settings(env or {}, home)
    layout = Layout(
        workdir=str(workdir),
        homes=homes,
        hidden=hidden,
        readonly=tuple(str(p) for p in readonly),
        writable=tuple(str(p) for p in writable),
        writable_files=tuple(str(Path(home, name)) for name in needs.state_files),
        protected=tuple(str(p) for p in protected),
        moved=tuple((str(source), str(target)) for source, target in moved),
        shown_files=shown,
        env={**inside_env, **needs.env},
        network=network,
    )
    return replace(layout, links=tuple(reach.links_on_the_way(reach.named(layout)).items()))


def _settings(env: Mapping[str, str], home: str) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
    """What teleclaude run inside needs of the user's (a finalizer's gate, a worker's next_work): the user's
    teleclaude.toml and the trusted-settings file, read-only, where teleclaude inside looks for them (it has
    no TELECLAUDE_DB), and the XDG_CONFIG_HOME that finds the first."""
    from teleclaude.adapters.settings import FILE_NAME, user_config_file
    from teleclaude.adapters.trust_store import trust_path

    shown = []
    user = user_config_file(FILE_NAME, env)
    if user is not None:
        shown.append((str(user), str(user)))
    if home:
        shown.append((str(trust_path(env)), str(trust_path({"HOME": home}))))
    xdg = env.get("XDG_CONFIG_HOME", "")
    return tuple(shown), ({"XDG_CONFIG_HOME": xdg} if os.path.isabs(xdg) else {})


HEADS = given.HEADS


def _worktree_git(repo: gitx.Repo, tree: Path) -> tuple[list[Path], list[Path], list[tuple[Path, Path]]]:
    """(writable, protected, moved) of the git directory for a worker's commits in its worktree `tree`.

    Its sandbox's refs/heads is a folder of its own holding its branch, of which the branch everyone sees
    is a link (`link_branch`): its commits move that branch, and no other ref, whenever it was made, can be
    written or removed by it (refs/heads itself is out of its reach); main's ref is shown read-only in
    it."""
    admin = gitx.worktree_git_dir(tree)
    if admin is None:  # not a linked worktree: nothing of git's is writable
        return [], [], []
    common = repo.common_dir
    lock = common / fs.LOCK_NAME
    given.inside_git(repo, admin, common / "objects", lock, common / HEADS)
    own = given.own_branch(repo, admin, tree)
    log = common / "logs" / "refs" / "heads" / own  # its reflog, which git appends to
    given.inside_git(repo, common / "refs" / "heads", common / HEADS / given.folder(own, admin.name), log)
    lock.touch(exist_ok=True)
    own_ref = f"refs/heads/{own}"
    main = gitx.main_head_ref(repo)
    if main.startswith("refs/heads/") and not (common / main).is_file():  # packed: made loose, then bound
        gitx.run_git(["update-ref", main, gitx.commit_of(repo.root, main)], repo.root)
    shown = main.startswith("refs/heads/") and main != own_ref  # main's ref, read-only in its refs/heads
    heads = link_branch(repo, admin, own, (main.removeprefix("refs/heads/"),) if shown else ())
    writable = [admin, common / "objects", lock]
    protected = [tree / ".git", admin / "commondir", admin / "gitdir"]
    if (heads / own).is_file():  # its reflog made first
        log.parent.mkdir(parents=True, exist_ok=True)
        log.touch(exist_ok=True)
        writable.append(log)
    if shown:
        protected.append(common / main)
    return writable, [p for p in protected if p.exists()], [(heads, common / "refs" / "heads")]


_COMMIT = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?\n?")


def link_branch(repo: gitx.Repo, admin: Path, own: str, shown: tuple[str, ...] = ()) -> Path:
    """The folder the sandboxed workers of the linked worktree (admin folder `admin`) on branch `own` see as
    refs/heads, holding that branch (when it has a commit), of which refs/heads/OWN is made a link (relative):
    git outside reads what a worker commits inside at once. Linked already (a worker started ahead of the
    next step shares it with the one at work), it stays. `shown`: the refs bound read-only into it (main's),
    whose places are cleared of what a worker made there (a link, a folder). A `git pack-refs` or a commit
    made outside replaces the link with the branch's commit; the next worker links it again."""
    # one folder a branch: a worker is never shown another branch's file, whichever worktree had it before
    heads = repo.common_dir / HEADS / given.folder(own, admin.name)
    heads.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in shown:
        _clear(heads, name, keep_file=True)
    if not own:
        return heads
    real = repo.common_dir / "refs" / "heads" / own
    kept = heads / own
    link = os.path.relpath(kept, real.parent)
    linked = real.is_symlink() and os.readlink(real) == link
    if linked and _holds_commit(heads, own):
        return heads
    if linked:  # what a worker made of the file is no commit: git reads the branch's packed one, if any
        real.unlink()
    commit = gitx.commit_of(repo.root, f"refs/heads/{own}") or _last_logged(repo, own)
    if not commit:
        return heads
    _clear(heads, own, keep_file=False)
    kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fs.atomic_write(kept, f"{commit}\n".encode(), follow=False)
    made = heads.parent / f".{secrets.token_hex(8)}.link"  # on the same file system: renamed at once
    os.symlink(link, made)
    try:
        os.replace(made, real)
    finally:
        made.unlink(missing_ok=True)
    return heads


def relink(project: Path, subfolder: str | None) -> None:
    """The branch of worktree `project/subfolder` linked again into the folder its sandboxed workers see as
    refs/heads, after git outside moved it: a catch-up's fast-forward writes the branch as a file where its
    link was, and a worker started ahead would then commit only into its folder (its commits lost to git
    outside, its changes left uncommitted there). Nothing for a branch no sandboxed worker has had."""
    if not subfolder:
        return
    admin = gitx.worktree_git_dir(project / subfolder)
    repo = gitx.find_repo(project)
    own = given.kept_branch(repo, admin) if admin is not None else ""
    if admin is not None and own and (repo.common_dir / HEADS / given.folder(own, admin.name)).is_dir():
        link_branch(repo, admin, own)


def _last_logged(repo: gitx.Repo, own: str) -> str:
    """The commit branch `own` was last moved to, as its reflog says: what it was before a worker made its
    file no commit. "" when there is none."""
    lines = fs.read_tail(repo.common_dir / "logs" / "refs" / "heads" / own, 4096)
    moved = lines[-1].split()[1:2] if lines else []
    return gitx.commit_of(repo.root, moved[0]) if moved and _COMMIT.fullmatch(moved[0].encode()) else ""


def _holds_commit(heads: Path, name: str) -> bool:
    """`heads/name` is a regular file holding a commit id, read without following a link or waiting on a
    pipe (its folders included: a worker may have made any of them something else)."""
    if any(part.is_symlink() for part in (heads / name).parents if part.is_relative_to(heads)):
        return False
    try:
        fd = os.open(heads / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and bool(_COMMIT.fullmatch(os.read(fd, 128)))
    finally:
        os.close(fd)


def _clear(heads: Path, name: str, *, keep_file: bool) -> None:
    """The way to `heads/name` cleared of what is not a folder (a link, a file), and `heads/name` itself of
    what is not a regular file (`keep_file`) or of anything."""
    place = heads
    for part in Path(name).parts:
        last = place / part == heads / name
        place = place / part
        if place.is_symlink() or (place.exists() and not place.is_dir() and not last):
            place.unlink()
        elif place.is_dir() and last:
            shutil.rmtree(place)
        elif last and (not keep_file or not place.is_file()):
            place.unlink(missing_ok=True)


def _under(path: Path, folders: tuple[str, ...]) -> bool:
    return any(path == Path(folder) or path.is_relative_to(folder) for folder in folders)


def _dir(path: str) -> bool:
    return Path(path).is_dir() and not _under(Path(path), ("/tmp",))


def _user_home() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        return ""


def _agent_folder() -> str:
    sock = os.environ.get("SSH_AUTH_SOCK", "")
    return str(Path(sock).parent) if sock.startswith("/") else ""


# --- the per-session channel -------------------------------------------------------------------------------


def channel_folder(store: Path, session_id: str) -> Path:
    """The folder a sandboxed worker's hooks write into (beside the sessions database): its only way out."""
    return Path(f"{store}.channels") / session_id


def open_channel(store: Path, session_id: str) -> Path:
    folder = channel_folder(store, session_id)
    folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def write_step(folder: Path, command: str, args: str) -> None:
    """The session's command, for a worker that cannot read the sessions database (the demo's scripted
    model has the CLI run `stand_in --step`)."""
    fs.atomic_write(folder / "step", json.dumps({"command": command, "args": args}).encode(), follow=False)


def read_step(folder: Path) -> tuple[str, str] | None:
    try:
        step = json.loads((folder / "step").read_text(encoding="utf-8"))
        return str(step["command"]), str(step["args"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_mark(folder: Path, option: str, value: str) -> bool:
    """A hook's sealed mark (runtime/core/marks.py), as a file named after its tmux option."""
    return channel.write_mark(str(folder), option, value)


def listing(store: Path, session_id: str) -> frozenset[str]:
    """The names of the files in a session's channel (`channel_folder`), but its pipe (`listen`); none when
    it has no channel."""
    try:
        return frozenset(os.listdir(f"{store}.channels/{session_id}")) - _PIPES
    except OSError:
        return frozenset()


_PIPES = frozenset((channel.LOOK,))


def read_marks(folder: Path, files: frozenset[str] | None = None) -> dict[str, str]:
    """The marks in a session's channel ({tmux option: sealed value}); none when it has no channel.
    `files`: the channel's `listing`, when taken already (only the marks it names are read)."""
    marks = {}
    options = ("@teleclaude_turn_end", "@teleclaude_stop_failure", "@teleclaude_usage", "@teleclaude_spend")
    for option in (*options, "@teleclaude_cost"):
        if files is not None and option.lstrip("@") not in files:
            continue
        try:
            marks[option] = (folder / option.lstrip("@")).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return marks


TRANSCRIPT = "transcript"  # the prompt hook's path of the CLI's record of the session


def read_transcript(folder: Path, home: str, needs: SandboxNeeds) -> str | None:
    """The transcript path the worker's prompt hook left in the channel (`clear_mark(folder, TRANSCRIPT)`
    once kept): only one in its CLI's state folders (the observer reads that file); one elsewhere is taken
    away unread."""
    mark = folder / TRANSCRIPT
    try:
        path = mark.read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None
    own = own_record(path, home, needs)
    if own is None:
        mark.unlink(missing_ok=True)
    return own


def own_record(path: str, home: str, needs: SandboxNeeds) -> str | None:
    """`path` resolved, when it is in the CLI's state folders (where a sandboxed CLI keeps its record of the
    session); None for a path anywhere else, which a hook inside has no business naming."""
    if not home or not path or len(path) > 4096 or "\0" in path:
        return None
    resolved = Path(path).resolve()
    folders = tuple(str(Path(home, state).resolve()) for state in needs.state)
    return str(resolved) if _under(resolved, folders) else None


CONVERSATION = "conversation"  # a hook's CLI's own id of its session (what a later worker resumes)
CONVERSATION_KEPT = 200  # characters: a longer one is no CLI's id


def name_record(folder: Path, transcript: str, conversation: str = "") -> None:
    """A hook's news of the CLI's record of the session (its path) and, when it says it, the CLI's own id
    of the session: left in the channel (`read_transcript`, `read_conversation`) for the observer."""
    if transcript:
        write_mark(folder, TRANSCRIPT, transcript)
    if conversation and len(conversation) <= CONVERSATION_KEPT:
        write_mark(folder, CONVERSATION, conversation)


def read_conversation(folder: Path) -> str:
    """The CLI's id of the session a hook left in the channel ("": none, or not one)."""
    try:
        fd = os.open(folder / CONVERSATION, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    try:
        text = os.read(fd, CONVERSATION_KEPT + 1).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)
    return text if 0 < len(text) <= CONVERSATION_KEPT and text.isprintable() else ""


TOOL_USES = "tool-uses.jsonl"
TOOL_USES_KEPT = 64 * 1024  # bytes of a channel's tool uses read at once (a flood is cut, not stored)


def append_tool_use(folder: Path, raw: str) -> None:
    """A tool hook's input, the time it ran with it, as one line of the channel's tool uses."""
    data = json.loads(raw)
    if not isinstance(data, dict) or not isinstance(data.get("tool_name"), str):
        raise ValueError("the input has no tool_name")
    line = {"tool": data["tool_name"], "input": data.get("tool_input"), "cwd": data.get("cwd") or ""}
    line["at"] = time.time()
    for key, name in (("conversation", "session_id"), ("transcript", "transcript_path")):
        if isinstance(data.get(name), str) and data[name]:  # the CLI's id of the session, its record
            line[key] = data[name]
    fd = os.open(folder / TOOL_USES, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def take_tool_uses(folder: Path) -> list[dict[str, object]]:
    """The tool uses the channel holds, taken out of it (the observer records them)."""
    taken = folder / f"{TOOL_USES}.taken"
    try:
        os.replace(folder / TOOL_USES, taken)
    except OSError:
        return []
    try:
        lines = fs.read_tail(taken, TOOL_USES_KEPT)
    finally:
        taken.unlink(missing_ok=True)
    uses = []
    for line in lines:
        try:
            use = json.loads(line)
        except ValueError:
            continue
        if isinstance(use, dict) and isinstance(use.get("tool"), str) and isinstance(use.get("at"), float):
            uses.append(use)
    return uses


def named_in(uses: list[dict[str, object]]) -> tuple[str, str]:
    """(the CLI's id of its session, its record's path) the latest of a channel's tool uses name ("":
    none): what a local tool hook keeps on the session (runtime/hooks/tool.py)."""
    conversation = transcript = ""
    for use in uses:
        named = use.get("conversation")
        if isinstance(named, str) and 0 < len(named) <= CONVERSATION_KEPT and named.isprintable():
            conversation = named
        path = use.get("transcript")
        if isinstance(path, str) and path:
            transcript = path
    return conversation, transcript


def clear_mark(folder: Path, option: str) -> None:
    (folder / option.lstrip("@")).unlink(missing_ok=True)


REPORT = "report"
REPORT_KEPT = 16 * 1024  # bytes of a report read (its text is cut at 500 characters anyway)


def write_report(folder: Path, text: str, wait_cmd: str | None) -> None:
    """A worker's report_status, for the observer to record (it cannot reach the sessions database); a
    newer one replaces one not taken yet."""
    line = json.dumps({"text": text, "wait_cmd": wait_cmd or ""})
    fs.atomic_write(folder / REPORT, line.encode(), follow=False, mode=0o600)


def take_report(folder: Path) -> tuple[str, str | None] | None:
    """The report the channel holds, (text, wait_cmd), taken out of it; None when it holds none (or a
    link, or not a report)."""
    taken = folder / f"{REPORT}.taken"
    try:
        os.replace(folder / REPORT, taken)
    except OSError:
        return None
    try:
        fd = os.open(taken, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            report = json.loads(os.read(fd, REPORT_KEPT))
        finally:
            os.close(fd)
        return str(report["text"]), str(report["wait_cmd"]) or None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        taken.unlink(missing_ok=True)


def box_file(store: Path, session_id: str) -> Path:
    """Where a sandboxed worker's bubblewrap command line is kept, beside its channel (out of its reach):
    its post-report cycle runs the wait command in the same sandbox."""
    return Path(f"{store}.channels") / f"{session_id}.box"


def write_box(store: Path, session_id: str, prefix: list[str]) -> None:
    fs.atomic_write(box_file(store, session_id), json.dumps(prefix).encode(), follow=False, mode=0o600)


def read_box(store: Path, session_id: str) -> list[str] | None:
    """The bubblewrap command line (up to its `--`) of a sandboxed worker; None for a worker that is not
    sandboxed (it has no channel); [] for one whose record is gone or broken (run nothing)."""
    if not channel_folder(store, session_id).is_dir():
        return None
    try:
        prefix = json.loads(box_file(store, session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(prefix, list) or not prefix or prefix[-1] != "--":
        return []
    return [str(arg) for arg in prefix]


def close_channel(store: Path, session_id: str) -> None:
    shutil.rmtree(channel_folder(store, session_id), ignore_errors=True)
    box_file(store, session_id).unlink(missing_ok=True)
    Path(channel.look_beside(str(store), session_id)).unlink(missing_ok=True)


WAKE = channel.WAKE


def listen(store: Path, session_id: str) -> int | None:
    """The pipe a local worker's hooks poke after leaving their news, opened to read (`channel.listen`): a
    sandboxed worker's in its channel (`channel.LOOK`), another's beside the channels (`look_beside`: its
    stop wakes the run through it, not through a tmux client). None when it could not be made."""
    folder = channel_folder(store, session_id)
    if folder.is_dir():
        return channel.listen(str(folder / channel.LOOK))
    with suppress(OSError):
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return channel.listen(channel.look_beside(str(store), session_id))


def relayed(folder: Path) -> bool:
    """Whether the channel is a worker's on another computer: a relay there moves its marks onto its pane
    (nothing else in it reaches this machine)."""
    try:
        return stat.S_ISFIFO(os.lstat(folder / WAKE).st_mode)
    except OSError:
        return False


def wake(folder: Path) -> None:
    """Poke the channel's relay (after a mark was left), when it has one; never blocks."""
    channel.wake(str(folder))
