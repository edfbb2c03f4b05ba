"""Workers on other computers: OpenSSH's `ssh` client runs tmux (and git) on the remote host.

Nothing here is a protocol of its own: every remote action is one `ssh … HOST -- COMMAND` whose command is
an argument list joined with `shlex.join`, because ssh hands the remote login shell one string (it joins its
arguments with spaces). So each argument reaches the remote program exactly as given, whatever it holds.
Connections are shared through an OpenSSH control master (`ControlMaster=auto`), so the many small tmux
commands an observer sends cost one round trip each, not one handshake each.

`Fleet` is the runtime's tmux when teleclaude.toml names other computers: it answers for this machine's
private tmux server and for each remote one, telling them apart by a prefix on pane ids and session names
(`box:%3`, `box:tc-1a2b3c4d`), so the services that read panes need not know where a pane lives.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from teleclaude.adapters.tmux import Tmux, TmuxError
from teleclaude.config.profiles import Computer
from teleclaude.errors import ErrorCode
from teleclaude.runtime.core.sessions import PaneView

SEPARATOR = ":"  # tmux itself never puts a colon in a session name or pane id


def ssh_options(computer: Computer, user: bool = True) -> list[str]:
    """The `ssh` command line up to (not including) the destination; `user=False` leaves `-l USER` out."""
    control = Path(tempfile.gettempdir(), f"teleclaude-ssh-{os.getuid()}")
    control.mkdir(mode=0o700, exist_ok=True)
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"]
    argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}/%C", "-o", "ControlPersist=60"]
    for option in computer.ssh_options:
        argv += ["-o", option]
    if computer.identity_file:
        argv += ["-o", "IdentitiesOnly=yes", "-i", os.path.expanduser(computer.identity_file)]
    if computer.user and user:
        argv += ["-l", computer.user]
    return argv


def ssh_argv(computer: Computer, remote: Sequence[str]) -> list[str]:
    """`ssh … HOST -- 'arg' 'arg' …`: `remote` runs there as exactly these arguments."""
    port = ["-p", str(computer.port)] if computer.port else []
    return [*ssh_options(computer), *port, "--", computer.host, shlex.join(remote)]


def run(
    computer: Computer, remote: Sequence[str], timeout: float, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `remote` there; its output. Raises RemoteError on failure (ssh's own failures are status 255)."""
    try:
        done = subprocess.run(
            ssh_argv(computer, remote),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RemoteError(f"{computer.name}: {remote[0]} did not answer within {timeout:g}s") from None
    except OSError as error:
        raise RemoteError(f"cannot run ssh ({error}); install OpenSSH's client") from None
    if check and done.returncode == 255:
        raise Unreachable(f"{computer.name}: ssh to {computer.host} failed: {_why(done)}")
    if check and done.returncode != 0:
        raise RemoteError(f"{computer.name}: {remote[0]} failed: {_why(done)}")
    return done


def reach(computer: Computer, timeout: float) -> None:
    """Connect to `computer` (Unreachable when ssh cannot): the control master it leaves is what the git
    and tmux commands that follow use, so this costs no second handshake."""
    run(computer, ["true"], timeout)


def git_url(computer: Computer) -> str:
    """The remote clone as a git remote (git runs `ssh_options` for it: see `git_ssh_command`)."""
    user = f"{computer.user}@" if computer.user else ""
    port = f":{computer.port}" if computer.port else ""
    return f"ssh://{user}{computer.host}{port}{computer.project}"


def git_ssh_command(computer: Computer) -> str:
    """`core.sshCommand` for git: a shell string, so quoted word by word (git adds `-p PORT` and the host,
    and the user from the URL)."""
    return shlex.join(ssh_options(computer, user=False))


class RemoteError(TmuxError):
    pass


class Unreachable(RemoteError):
    """ssh itself failed (its exit status 255): no connection, no login, or a host key that does not match."""

    code = ErrorCode.COMPUTER_UNREACHABLE
    next_step = (
        "Check that `ssh` to it works from here (network, port, key, known_hosts), or run the step on "
        "another computer."
    )


class RemoteTmux(Tmux):
    """A private tmux server (`tmux -L SOCKET`) on another computer, driven through ssh."""

    local_processes = False

    def __init__(self, computer: Computer, socket: str, timeout: float = 10.0) -> None:
        super().__init__(socket, timeout)
        self.computer = computer

    def _call(self, args: Sequence[str]) -> tuple[int, list[str], list[str]]:
        done = run(self.computer, [*self._tmux(), *args], self.timeout, check=False)
        if done.returncode == 255:
            return 255, [], [f"ssh to {self.computer.name} failed: {_why(done)}"]
        return done.returncode, _lines(done.stdout), _lines(done.stderr)

    def _tmux(self) -> list[str]:
        """tmux there: -u as ssh gives it no locale (else it prints a tab as `_`); a pane gets the PATH of the
        tmux client that creates it (tmux 3.2+), so `path` is set on the client, not with `-e`."""
        path = ["env", f"PATH={self.computer.path}"] if self.computer.path else []
        return [*path, "tmux", "-u", "-L", self.socket]

    def wait_for(self, channel: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ssh_argv(self.computer, [*self._tmux(), "wait-for", channel]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def signal(self, channel: str) -> None:
        self.cmd("wait-for", "-S", channel, check=False)

    def control_argv(self, session: str) -> list[str]:
        """The control client runs there, through the same ssh connection the commands use; closing its
        stdin here ends ssh's, which detaches it there."""
        return ssh_argv(self.computer, [*self._tmux(), "-N", "-C", "attach-session", "-t", f"={session}"])


class Fleet(Tmux):
    """This machine's tmux server and the remote ones as one: remote pane ids and session names carry
    `NAME:` in front. `in_use()` names the computers with live sessions: only those are asked for panes."""

    def __init__(
        self,
        socket: str,
        timeout: float,
        remotes: Mapping[str, Computer],
        in_use: Callable[[], set[str]],
    ) -> None:
        super().__init__(socket, timeout)
        self.remotes = {name: RemoteTmux(computer, socket, timeout) for name, computer in remotes.items()}
        self.in_use = in_use

    def on(self, computer: str) -> Tmux:
        return self.remotes.get(computer, self)

    def follow(self) -> None:
        super().follow()
        for remote in self.remotes.values():
            remote.follow()

    def unfollow(self) -> None:
        super().unfollow()
        for remote in self.remotes.values():
            remote.unfollow()

    def watch(self, session: str, pane_id: str) -> None:
        tmux, bare = self._route(pane_id)
        if tmux is self:
            super().watch(session, pane_id)
        else:
            tmux.watch(self._route(session)[1], bare)

    def unwatch(self, session: str) -> None:
        tmux, bare = self._route(session)
        (super().unwatch if tmux is self else tmux.unwatch)(bare)

    def output_mark(self, pane_id: str) -> int | None:
        tmux, bare = self._route(pane_id)
        return super().output_mark(pane_id) if tmux is self else tmux.output_mark(bare)

    def await_output(self, pane_id: str, mark: int | None, timeout: float, poll: float = 0.05) -> bool:
        tmux, bare = self._route(pane_id)
        if tmux is self:
            return super().await_output(pane_id, mark, timeout, poll)
        return tmux.await_output(bare, mark, timeout, poll)

    def views(self) -> dict[str, PaneView]:
        views = super().views()
        for name in sorted(self.in_use() & set(self.remotes)):
            remote = self.remotes[name]
            for view in remote.views().values():
                pane_id = qualify(remote, view.pane_id)
                views[pane_id] = replace(view, pane_id=pane_id)
        return views

    def glance(self, pane_id: str) -> tuple[PaneView | None, list[str]]:
        tmux, bare = self._route(pane_id)
        if tmux is self:
            return super().glance(pane_id)
        view, screen = tmux.glance(bare)
        return (None if view is None else replace(view, pane_id=pane_id)), screen

    def capture(self, pane_id: str, start: int, end: int, history_size: int | None = None) -> list[str]:
        tmux, bare = self._route(pane_id)
        if tmux is self:
            return super().capture(pane_id, start, end, history_size)
        return tmux.capture(bare, start, end, history_size)

    def send_text(self, pane_id: str, text: str) -> None:
        tmux, bare = self._route(pane_id)
        (super().send_text if tmux is self else tmux.send_text)(bare, text)

    def send_key(self, pane_id: str, key: str) -> None:
        tmux, bare = self._route(pane_id)
        (super().send_key if tmux is self else tmux.send_key)(bare, key)

    def clear_mark(self, pane_id: str, option: str) -> None:
        tmux, bare = self._route(pane_id)
        (super().clear_mark if tmux is self else tmux.clear_mark)(bare, option)

    def kill_session(self, name: str) -> None:
        tmux, bare = self._route(name)
        (super().kill_session if tmux is self else tmux.kill_session)(bare)

    def _route(self, name: str) -> tuple[Tmux, str]:
        computer, sep, bare = name.partition(SEPARATOR)
        if sep and computer in self.remotes:
            return self.remotes[computer], bare
        return self, name


def qualify(tmux: Tmux, name: str) -> str:
    """A pane id or session name as the runtime stores it: `NAME:` in front when on another computer."""
    return f"{tmux.computer.name}{SEPARATOR}{name}" if isinstance(tmux, RemoteTmux) else name


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _why(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join(done.stderr.split()) or f"exit status {done.returncode}"


def close(computer: Computer) -> None:
    """End the shared connection to `computer` (else its control master lingers for ControlPersist)."""
    port = ["-p", str(computer.port)] if computer.port else []
    subprocess.run(
        [*ssh_options(computer), *port, "-O", "exit", "--", computer.host],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
        check=False,
    )
