"""A worker's sandbox on another computer: its layout from that computer's paths (runtime/core/sandbox.py
`remote_layout`), made into bubblewrap's argv by the one `bwrap_argv`."""

from __future__ import annotations

from teleclaude.runtime.core.sandbox import RemoteHost, RemoteTree, bwrap_argv, remote_layout

from .test_sandbox import last_mount, mounts

CLONE = "/tmp/remote/project"  # a clone under /tmp: shown read-only inside the sandbox's own /tmp
TREE = f"{CLONE}/trees/feat"
GIT = f"{CLONE}/.git"
HOST = RemoteHost(
    home="/home/dev",
    user_home="/home/dev-real",
    hidden=("/run/user/1001", "/tmp/tmux-1001"),
    installs=("/home/dev/.local/bin", "/home/dev/.nvm/versions/node/v22", "/usr/bin", "/opt/tools"),
    settings="/home/dev/.config/teleclaude/teleclaude.toml",
)
WORKTREE = RemoteTree(
    workdir=TREE,
    root=CLONE,
    admin=f"{GIT}/worktrees/feat",
    common=GIT,
    lock=f"{GIT}/teleclaude.lock",
    others=(f"{GIT}/refs/heads/main", f"{GIT}/logs/refs/heads/main", f"{GIT}/refs/heads/other"),
    logs=f"{GIT}/logs/refs/heads",
)
CHANNEL = "/home/dev/.teleclaude/channels/1a2b3c4d"


def argv(network: bool = True) -> list[str]:
    layout = remote_layout(
        HOST,
        WORKTREE,
        state=(".claude",),
        state_files=(".claude.json",),
        channel=CHANNEL,
        env={"CLAUDE_CODE_BUBBLEWRAP": "1"},
        network=network,
    )
    return bwrap_argv("/usr/bin/bwrap", layout, ["claude", "--flag"])


def test_the_remote_worktree_is_writable_inside_its_read_only_clone_and_the_other_branches_are_not():
    built = argv()
    assert built[-3:] == ["--", "claude", "--flag"] and built[built.index("--chdir") + 1] == TREE
    assert last_mount(built, CLONE) == "--ro-bind"
    assert last_mount(built, f"{CLONE}/intruder.txt") == "--ro-bind"
    assert last_mount(built, f"{TREE}/greeting.py") == "--bind"
    for writable in ("objects/ab/cdef", "refs/heads/feat", "worktrees/feat/HEAD", "teleclaude.lock"):
        assert last_mount(built, f"{GIT}/{writable}") == "--bind", writable
    for protected in (f"{TREE}/.git", f"{GIT}/worktrees/feat/commondir", f"{GIT}/config"):
        assert last_mount(built, protected) == "--ro-bind", protected
    heads = built.index(f"{GIT}/refs/heads")
    for other in WORKTREE.others:  # read-only when still there: one delivered meanwhile is removed there
        at = built.index(other)
        assert built[at - 1 : at + 2] == ["--ro-bind-try", other, other] and at > heads, other


def test_the_remote_home_is_empty_and_read_only_but_for_the_clis_state_and_the_channel():
    built = argv()
    order = mounts(built)
    for home in ("/home/dev", "/home/dev-real"):
        assert last_mount(built, f"{home}/.ssh/id_ed25519") == "--tmpfs"  # empty
        assert order.index(("--tmpfs", home)) < order.index(("--remount-ro", home))  # and read-only
    assert order.index(("--bind", "/home/dev/.claude")) < order.index(("--remount-ro", "/home/dev"))
    assert last_mount(built, "/home/dev/.claude/settings.json") == "--bind"
    assert ("--bind-try", "/home/dev/.claude.json") in zip(built, built[1:], strict=False)
    assert last_mount(built, f"{CHANNEL}/teleclaude_turn_end") == "--bind"
    assert last_mount(built, "/home/dev/.local/bin/claude") == "--ro-bind"  # its install, in the home
    assert ("--ro-bind-try", HOST.settings) in zip(built, built[1:], strict=False)
    assert "/opt/tools" not in built and "/usr/bin" not in built  # the system is shown read-only anyway


def test_the_remote_agent_sockets_and_tmux_socket_are_hidden_and_the_network_closes_on_request():
    built = argv()
    assert last_mount(built, "/run/user/1001/ssh-agent.sock") == "--tmpfs"
    assert last_mount(built, "/tmp/tmux-1001/teleclaude") == "--tmpfs"  # /tmp is the sandbox's own
    for name in ("TMUX", "TMUX_PANE", "SSH_AUTH_SOCK"):
        assert name in built[built.index("--unsetenv") :]
    assert "--unshare-net" not in built and "--unshare-net" in argv(network=False)


def test_a_remote_workers_links_are_followed_as_a_local_ones():
    """The probe's links there (a venv's Python linking into the user's home there, a PATH folder linked
    from the sandbox's own /tmp) reach `bwrap_argv` as a local worker's: bound where they lead, made again
    where the sandbox hides their place."""
    python = "/home/dev-real/.pyenv/versions/3.11.7"
    host = RemoteHost(
        home="/home/dev",
        user_home="/home/dev-real",
        installs=(python, "/tmp/venv"),
        links=(("/tmp/venv/bin/python", f"{python}/bin/python3.11"), ("/tmp/clis", "/opt/clis")),
    )
    layout = remote_layout(host, WORKTREE, state=(), state_files=(), channel=CHANNEL, env={}, network=True)
    built = bwrap_argv("/usr/bin/bwrap", layout, ["claude"])
    assert last_mount(built, f"{python}/bin/python3.11") == "--ro-bind"
    assert last_mount(built, "/tmp/venv/bin/python") == "--ro-bind"  # shown with the venv, as it is
    assert ("--symlink", "/tmp/clis") in mounts(built)  # its place is in the sandbox's own /tmp
