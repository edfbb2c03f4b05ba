"""A worker's sandbox as bubblewrap's argv (runtime/core/sandbox.py), `[runtime] sandbox`, and what its hooks
leave in its channel folder (adapters/sandbox.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from teleclaude.adapters import sandbox
from teleclaude.agents.profile import SandboxNeeds
from teleclaude.config.parse import ConfigError, parse_config
from teleclaude.config.profiles import RuntimeConfig, SandboxMode
from teleclaude.errors import ErrorCode, Failure
from teleclaude.runtime.core.marks import turn_end_payload, turn_end_prompt, turn_end_stamp
from teleclaude.runtime.core.sandbox import Boxing, Layout, boxing, bwrap_argv, denied_path, raced

PROJECT = "/home/u/project"
TREE = f"{PROJECT}/trees/feat"
GIT = f"{PROJECT}/.git"
LAYOUT = Layout(
    workdir=TREE,
    homes=("/home/u",),
    hidden=("/run/user/1000",),
    readonly=(PROJECT, "/home/u/.local/bin"),
    writable=(TREE, f"{GIT}/objects", f"{GIT}/worktrees/feat", "/home/u/.claude"),
    writable_files=("/home/u/.claude.json",),
    protected=(f"{GIT}/refs/heads/main", f"{TREE}/.git"),
    moved=((f"{GIT}/teleclaude-heads/feat", f"{GIT}/refs/heads"),),
    env={"CLAUDE_CODE_BUBBLEWRAP": "1"},
)


def mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(flag, path) of each mount, in bwrap's order (which decides what a path inside another shows)."""
    found, index = [], 0
    while argv[index] != "--":
        flag = argv[index]
        if flag in ("--bind", "--ro-bind", "--bind-try", "--dev-bind", "--ro-bind-try", "--symlink"):
            found.append((flag, argv[index + 2]))
            index += 3
        elif flag in ("--tmpfs", "--remount-ro", "--proc"):
            found.append((flag, argv[index + 1]))
            index += 2
        else:
            index += 1
    return found


def last_mount(argv: list[str], path: str) -> str:
    """What a path is, as the last mount of it or of a folder it is in says."""
    flag = ""
    for mount, where in mounts(argv):
        if path == where or path.startswith(where.rstrip("/") + "/"):
            flag = mount if mount != "--remount-ro" or where == path else flag
    return flag


def test_the_command_runs_after_the_sandbox_in_the_worktree():
    argv = bwrap_argv("/usr/bin/bwrap", LAYOUT, ["claude", "--flag"])
    assert argv[0] == "/usr/bin/bwrap" and argv[-3:] == ["--", "claude", "--flag"]
    assert argv[argv.index("--chdir") + 1] == TREE


def test_the_worktree_is_writable_inside_the_read_only_project_and_mains_ref_read_only_inside_the_refs():
    argv = bwrap_argv("bwrap", LAYOUT, ["x"])
    assert last_mount(argv, f"{TREE}/src/a.py") == "--bind"
    assert last_mount(argv, f"{PROJECT}/README.md") == "--ro-bind"
    assert last_mount(argv, f"{PROJECT}/trees/other/a.py") == "--ro-bind"
    assert last_mount(argv, f"{GIT}/refs/heads/feat") == "--bind"
    assert last_mount(argv, f"{GIT}/refs/heads/main") == "--ro-bind"
    assert last_mount(argv, f"{GIT}/config") == "--ro-bind"
    assert last_mount(argv, f"{TREE}/.git") == "--ro-bind"


def test_the_refs_heads_a_worker_sees_is_its_own_folder_never_the_one_other_branches_are_made_in():
    argv = bwrap_argv("bwrap", LAYOUT, ["x"])
    index = argv.index(f"{GIT}/refs/heads")
    assert argv[index - 2 : index] == ["--bind", f"{GIT}/teleclaude-heads/feat"]
    assert f"{GIT}/refs/heads" not in argv[:index]  # no bind of the real one, writable or not
    order = mounts(argv)
    assert order.index(("--bind", f"{GIT}/refs/heads")) < order.index(("--ro-bind", f"{GIT}/refs/heads/main"))


def test_the_home_is_empty_and_read_only_but_for_the_clis_own_state():
    argv = bwrap_argv("bwrap", LAYOUT, ["x"])
    order = mounts(argv)
    assert order.index(("--tmpfs", "/home/u")) < order.index(("--bind", "/home/u/.claude"))
    assert order.index(("--bind", "/home/u/.claude")) < order.index(("--remount-ro", "/home/u"))
    assert ("--bind-try", "/home/u/.claude.json") in order
    assert ("--tmpfs", "/run/user/1000") in order and ("--tmpfs", "/tmp") in order
    assert not any(path.startswith("/home/u/.ssh") for _, path in order)


def test_no_agent_socket_no_tmux_its_own_pids_no_capabilities_and_the_drivers_variables():
    argv = bwrap_argv("bwrap", LAYOUT, ["x"])
    unset = {argv[i + 1] for i, arg in enumerate(argv) if arg == "--unsetenv"}
    assert {"SSH_AUTH_SOCK", "TMUX", "TMUX_PANE", "GPG_AGENT_INFO"} <= unset
    assert "--unshare-pid" in argv and argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--die-with-parent" in argv
    at = argv.index("--setenv")
    assert argv[at : at + 3] == ["--setenv", "CLAUDE_CODE_BUBBLEWRAP", "1"]


def test_the_network_stays_unless_closed():
    assert "--unshare-net" not in bwrap_argv("bwrap", LAYOUT, ["x"])
    closed = Layout(workdir=TREE, homes=("/home/u",), network=False)
    assert "--unshare-net" in bwrap_argv("bwrap", closed, ["x"])


def test_a_path_both_read_only_and_writable_is_bound_once_writable():
    both = Layout(workdir=PROJECT, homes=(), readonly=(PROJECT,), writable=(PROJECT,))
    assert [m for m in mounts(bwrap_argv("bwrap", both, ["x"])) if m[1] == PROJECT] == [("--bind", PROJECT)]


def test_sandbox_setting():
    assert RuntimeConfig().sandbox is SandboxMode.AUTO
    text = '[runtime]\nsandbox = "off"\nsandbox_network = false'
    runtime = parse_config([("/u/teleclaude.toml", text)]).runtime
    assert runtime is not None and runtime.sandbox is SandboxMode.OFF and runtime.sandbox_network is False
    with pytest.raises(ConfigError, match="runtime.sandbox"):
        parse_config([("/u/teleclaude.toml", '[runtime]\nsandbox = "docker"')])


@pytest.mark.parametrize(
    ("mode", "usable", "chosen"),
    [
        (SandboxMode.OFF, True, Boxing.OFF),
        (SandboxMode.OFF, False, Boxing.OFF),
        (SandboxMode.AUTO, True, Boxing.INSIDE),
        (SandboxMode.AUTO, False, Boxing.UNSANDBOXED),
        (SandboxMode.BWRAP, True, Boxing.INSIDE),
        (SandboxMode.BWRAP, False, Boxing.REFUSED),
    ],
)
def test_a_worker_here_or_there_starts_boxed_as_it_is_or_not_at_all_by_the_setting_and_the_probe(
    mode, usable, chosen
):
    assert boxing(mode, usable) is chosen


def test_an_untrusted_project_file_cannot_turn_the_sandbox_off():
    mine, path = "/u/teleclaude.toml", "/p/teleclaude.toml"
    sources = [(mine, '[runtime]\nsandbox = "auto"'), (path, '[runtime]\nsandbox = "off"')]
    runtime = parse_config(sources, untrusted=[path]).runtime
    assert runtime is not None and runtime.sandbox is SandboxMode.AUTO
    assert runtime.untrusted is not None and "runtime.sandbox" in runtime.untrusted.keys


@pytest.mark.parametrize(
    ("row", "path"),
    [
        (
            "Error: EROFS: read-only file system, open '/home/u/.claude/settings.json'",
            "/home/u/.claude/settings.json",
        ),
        ("[Errno 30] Read-only file system: '/home/u/.stand-in'", "/home/u/.stand-in"),
        ("sh: 1: cannot create /home/u/x: Read-only file system", "/home/u/x"),
        ("Error: ENOENT: no such file or directory, mkdir '/home/u/.npm/_logs'", "/home/u/.npm/_logs"),
        ("all good", None),
    ],
)
def test_the_path_a_cli_could_not_open_is_read_from_its_output(row, path):
    assert denied_path(["some output", row, ""]) == path


def _wrapped(text: str, width: int = 40) -> list[str]:
    return [text[i : i + width] for i in range(0, len(text), width)]


def test_a_sandbox_bubblewrap_could_not_make_for_a_path_gone_is_raced_and_a_cli_s_own_error_is_not(tmp_path):
    """bubblewrap's own refusal (a source gone as it made the sandbox, here gone before), read from the pane's
    rows as tmux wraps them, is a start to try again; a CLI's own ENOENT, a path gone that is no branch's ref,
    or a refusal for another reason, is not."""
    import subprocess

    bwrap = sandbox.probe(os.environ)
    if not bwrap.usable:
        pytest.skip(f"bubblewrap does not run here: {bwrap.problem}")
    gone = tmp_path / "refs" / "heads" / "item-09"
    argv = [bwrap.bwrap, "--ro-bind", "/", "/", "--ro-bind", str(gone), str(gone), "true"]
    refusal = subprocess.run(argv, capture_output=True, text=True, timeout=60).stderr.strip()
    assert refusal.startswith("bwrap: ")
    assert raced(["", *_wrapped(refusal), ""])
    elsewhere = refusal.replace(str(gone), str(tmp_path / "cli" / "bin"))  # not a ref: the same again
    assert elsewhere != refusal and not raced(_wrapped(elsewhere))
    assert not raced(["Error: ENOENT: no such file or directory, mkdir '/home/u/.npm/_logs'"])
    assert not raced(["bwrap: Can't mount proc on /newroot/proc: Operation not permitted"])


# --- the channel: what a sandboxed worker's hooks leave for the observer ----------------------------------


@pytest.mark.parametrize("prompt", ["", "/next-build greeting", 'multi\nline\t"quoted" é ✓'])
def test_a_turn_end_mark_carries_the_prompt_on_one_printable_line(prompt):
    payload = turn_end_payload(1234, prompt)
    assert payload.isascii() and "\n" not in payload and "\t" not in payload
    assert turn_end_prompt(payload) == prompt


def test_a_turn_end_mark_of_an_older_hook_or_a_broken_one_carries_no_prompt():
    assert turn_end_prompt("1234") == ""
    assert turn_end_prompt("1234 not-json") == ""
    assert turn_end_prompt('1234 ["a list"]') == ""


@pytest.mark.parametrize(
    ("payload", "stamp"),
    [
        (turn_end_payload(1_795_909_019_973_600_000), 1_795_909_019.9736),
        (turn_end_payload(1_795_909_019_973_600_000, "/next-build greeting"), 1_795_909_019.9736),
        ("", None),
        ("soon", None),  # not a time: none told
    ],
)
def test_a_turn_end_mark_tells_when_its_hook_ran(payload, stamp):
    assert turn_end_stamp(payload) == stamp


def test_the_tool_uses_name_the_latest_conversation_and_record_and_nothing_unfit(tmp_path):
    folder = tmp_path / "channel"
    folder.mkdir()
    for conversation, transcript in (("first", "/h/.claude/a.jsonl"), ("second", ""), ("x" * 201, "")):
        raw = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "session_id": conversation}
        sandbox.append_tool_use(folder, json.dumps({**raw, "transcript_path": transcript}))
    uses = sandbox.take_tool_uses(folder)
    assert [use["tool"] for use in uses] == ["Bash"] * 3
    assert sandbox.named_in(uses) == ("second", "/h/.claude/a.jsonl")
    assert sandbox.named_in([{"conversation": "bad\x1b[31m"}]) == ("", "")


def test_a_conversation_and_record_named_by_a_stop_hook_are_kept_in_the_channel(tmp_path):
    folder = tmp_path / "channel"
    folder.mkdir()
    assert sandbox.read_conversation(folder) == ""
    sandbox.name_record(folder, "/h/.local/share/opencode/opencode.db", "ses_1")
    assert sandbox.read_conversation(folder) == "ses_1"
    assert (folder / sandbox.TRANSCRIPT).read_text() == "/h/.local/share/opencode/opencode.db"
    sandbox.name_record(folder, "", "y" * 201)  # no CLI's id: the one kept stays
    assert sandbox.read_conversation(folder) == "ses_1"


def test_only_a_record_in_the_clis_own_state_is_taken(tmp_path):
    needs = SandboxNeeds((".claude",))
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    mine = home / ".claude" / "projects" / "s.jsonl"
    assert sandbox.own_record(str(mine), str(home), needs) == str(mine)
    assert sandbox.own_record(str(home / ".ssh" / "id_ed25519"), str(home), needs) is None
    assert sandbox.own_record(str(home / ".claude" / ".." / ".ssh" / "k"), str(home), needs) is None
    assert sandbox.own_record("", str(home), needs) is None


# --- a worker's own branch, linked (adapters/sandbox.py `link_branch`) -------------------------------------


def _git(cwd, *args: str) -> str:
    import subprocess

    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


@pytest.fixture
def worktree(tmp_path):
    """A repository with main and the item branch `feat` checked out in trees/feat."""
    root = tmp_path / "project"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one")
    _git(root, "worktree", "add", "-q", "trees/feat", "-b", "feat")
    return root, root / "trees" / "feat"


def _layout(root, tree, home):
    from teleclaude.agents import PROFILES

    return sandbox.worker_layout(
        workdir=tree,
        project=root,
        home=str(home),
        needs=PROFILES["claude"].sandbox,
        binary="/usr/bin/env",
        path="/usr/bin:/bin",
        channel=tree,
        tmux_folder="",
        merges=False,
        network=True,
    )


def test_a_workers_refs_heads_is_its_own_folder_and_its_branch_a_link_git_outside_reads(worktree, tmp_path):
    root, tree = worktree
    commit = _git(root, "rev-parse", "feat")
    layout = _layout(root, tree, tmp_path)
    (heads, refs) = layout.moved[0]
    assert refs == str(root / ".git" / "refs" / "heads") and refs not in layout.writable
    branch = root / ".git" / "refs" / "heads" / "feat"
    assert branch.is_symlink() and branch.resolve() == (root / ".git" / heads / "feat").resolve()
    assert _git(root, "rev-parse", "feat") == commit
    assert str(root / ".git" / "refs" / "heads" / "main") in layout.protected  # shown read-only inside
    assert str(root / ".git" / "logs" / "refs" / "heads" / "feat") in layout.writable  # its reflog only
    assert _layout(root, tree, tmp_path).moved == layout.moved  # a worker started ahead shares it
    assert os.readlink(branch) == os.path.relpath(f"{heads}/feat", branch.parent)


def test_a_branch_file_its_worker_made_no_commit_is_linked_again_from_its_reflog(worktree, tmp_path):
    root, tree = worktree
    commit = _git(root, "rev-parse", "feat")
    heads = Path(_layout(root, tree, tmp_path).moved[0][0])
    (heads / "feat").unlink()
    os.mkfifo(heads / "feat")  # git outside would wait on it forever; teleclaude does not read it
    (heads / "main").unlink(missing_ok=True)
    (heads / "main").symlink_to("/etc/passwd")  # where main's ref is bound read-only: cleared
    _layout(root, tree, tmp_path)
    assert (heads / "feat").is_file() and _git(root, "rev-parse", "feat") == commit
    assert not (heads / "main").is_symlink()


def test_a_branch_packed_meanwhile_is_linked_again_from_its_packed_commit(worktree, tmp_path):
    root, tree = worktree
    _layout(root, tree, tmp_path)
    _git(root, "pack-refs", "--all", "--prune")
    branch = root / ".git" / "refs" / "heads" / "feat"
    assert not branch.exists()  # the link went with the packing
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "two")
    _layout(root, tree, tmp_path)
    assert branch.is_symlink() and _git(root, "log", "--format=%s", "-1", "feat") == "two"


def test_a_branch_caught_up_outside_is_linked_again_so_its_waiting_worker_commits_where_git_reads(
    worktree, tmp_path
):
    """A worker started ahead waits in its sandbox while the run fast-forwards its worktree to what main
    merged meanwhile (`gitx.catch_up`): git outside writes the branch as a file where the link was; relinked,
    the worker's folder holds the new commit and its next commit moves the branch everyone reads."""
    root, tree = worktree
    heads = Path(_layout(root, tree, tmp_path).moved[0][0])
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "merged")
    _git(tree, "merge", "-q", "--ff-only", "main")  # the catch-up, outside the sandbox
    branch = root / ".git" / "refs" / "heads" / "feat"
    assert not branch.is_symlink()  # git replaced the link
    sandbox.relink(root, "trees/feat")
    assert branch.is_symlink() and (heads / "feat").read_text().strip() == _git(root, "rev-parse", "main")
    (heads / "feat").write_text(_git(root, "commit-tree", "-p", "main", "-m", "inside", "main^{tree}") + "\n")
    assert _git(root, "log", "--format=%s", "-1", "feat") == "inside"  # what the worker commits is seen
    sandbox.relink(root, "trees/feat")  # linked already: left as it is
    assert _git(root, "log", "--format=%s", "-1", "feat") == "inside"
    sandbox.relink(root, None)  # a step in the main checkout: nothing


def test_a_branch_with_slashes_has_a_folder_of_its_own_and_its_link_leads_there(worktree, tmp_path):
    root, _ = worktree
    _git(root, "worktree", "add", "-q", "trees/team", "-b", "team/feat")
    heads = Path(_layout(root, root / "trees" / "team", tmp_path).moved[0][0])
    assert heads.name == "team%2Ffeat" and (heads / "team" / "feat").is_file()
    assert _git(root, "rev-parse", "team/feat") == _git(root, "rev-parse", "main")
    assert (root / ".git" / "refs" / "heads" / "team" / "feat").resolve() == (
        heads / "team" / "feat"
    ).resolve()


def test_a_worktree_whose_head_a_worker_pointed_at_another_branch_starts_nothing_and_leaves_it(
    worktree, tmp_path
):
    """A worker writes its worktree's HEAD (in its writable admin folder): the branch its sandbox may move
    is still the one kept at the first start; another named there starts nothing, a detached HEAD is given
    the kept branch."""
    root, tree = worktree
    _git(root, "branch", "other")
    _layout(root, tree, tmp_path)
    admin = Path(_git(tree, "rev-parse", "--absolute-git-dir"))
    (admin / "HEAD").write_text("ref: refs/heads/other\n")
    with pytest.raises(Failure) as refused:
        _layout(root, tree, tmp_path)
    assert refused.value.code is ErrorCode.WORKTREE_FAILED and 'branch="feat"' in str(refused.value)
    assert not (root / ".git" / "refs" / "heads" / "other").is_symlink()
    (admin / "HEAD").write_text(_git(root, "rev-parse", "feat") + "\n")  # detached
    heads = Path(_layout(root, tree, tmp_path).moved[0][0])
    assert heads.name == "feat" and (heads / "feat").is_file()


def test_a_worktree_switched_to_another_branch_by_hand_is_given_it_once_its_kept_branch_is_removed(
    worktree, tmp_path
):
    root, tree = worktree
    _layout(root, tree, tmp_path)
    _git(tree, "switch", "-q", "-c", "next")
    with pytest.raises(Failure) as refused:
        _layout(root, tree, tmp_path)
    kept = next(word for word in str(refused.value).split() if "teleclaude-heads" in word)
    Path(kept.rstrip(";")).unlink()
    heads = Path(_layout(root, tree, tmp_path).moved[0][0])
    assert heads.name == "next" and (heads / "next").is_file()
