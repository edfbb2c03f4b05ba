"""A real `sshd` on 127.0.0.1 for the tests of workers on another computer (Debian's openssh-server).

`sshd` starts one on a free port with a throwaway host key and user key. It gives its sessions a tmux
directory of their own (`SetEnv TMUX_TMPDIR=…`), so the remote tmux server is not this machine's, and a HOME
of their own (`SetEnv HOME=…`): the login is this machine's user, whose HOME stays as is. Test modules
import the fixture from here (`from ..loopback_sshd import sshd`), never from each other.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from teleclaude.adapters import ssh, trust_store
from teleclaude.agents import NAMES
from teleclaude.config.profiles import Computer
from teleclaude.demo.scenario import commit_all

from .servers import free_port
from .tmux_reaper import reaper, stop

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
NAME = "loopback-ssh"
MAX_SESSIONS = 10  # sshd's default, said: channels one connection may carry


class Server:
    """The sshd process, its log kept (`sshd -e`); `kill` ends it with every connection it serves (as a
    computer that drops), `start` brings it back on the same port."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.log: list[str] = []
        self.process: subprocess.Popen[str] = None  # type: ignore[assignment]
        self._drain: threading.Thread | None = None
        self.watchers: list[subprocess.Popen[bytes]] = []  # each sshd started again has a reaper of its own

    def start(self) -> bool:
        """True once sshd says it listens."""
        again = self.process is not None
        self.process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.config)],
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        if again:
            self.watchers.append(reaper(pids=[self.process.pid]))
        assert self.process.stderr is not None
        for line in self.process.stderr:  # the event: sshd says it listens (or why it cannot)
            self.log.append(line)
            if "Server listening on 127.0.0.1" in line:
                break
        else:
            self.process.wait()
            return False
        # sshd -e logs here: never let it block
        self._drain = threading.Thread(target=self._keep, args=(self.process.stderr,), daemon=True)
        self._drain.start()
        return True

    def _keep(self, stream) -> None:
        for line in stream:
            self.log.append(line)

    def kill(self, how: signal.Signals = signal.SIGKILL) -> None:
        """End sshd and the processes serving its connections (each in a session of its own, its children:
        the logins' tmux servers, daemons, live on, as on a computer whose network went away)."""
        pid = self.process.pid
        connections = [
            int(child) for task in Path(f"/proc/{pid}/task").glob("*") for child in _children(task)
        ]
        for each in (pid, *connections):
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, how)
        self.process.wait()
        if self._drain is not None:
            self._drain.join(timeout=10)
        # a process that outlived it (a remote tmux server it started) may hold its log's pipe: its reader
        # then never ends, and closing the pipe under it would wait for it
        if self.process.stderr is not None and not (self._drain and self._drain.is_alive()):
            self.process.stderr.close()


def _children(task: Path) -> list[str]:
    try:
        return (task / "children").read_text().split()
    except OSError:
        return []


@dataclass(frozen=True)
class Loopback:
    port: int
    user_key: Path
    known_hosts: Path
    tmux_dir: Path  # the "remote" tmux servers' folder
    db: Path  # the "remote" teleclaude database: nothing of this machine's sessions may land there
    home: Path  # the "remote" HOME (the login is this machine's user's: its own HOME is not touched)
    server: Server


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _faked_clock() -> str:
    """A run under libfaketime (scripts/year-ahead) keeps its clock in the login, whose environment sshd
    otherwise makes anew."""
    names = ("LD_PRELOAD", "FAKETIME", "FAKETIME_DONT_FAKE_MONOTONIC")
    return "".join(f" {name}={os.environ[name]}" for name in names if name in os.environ)


def launch(folder: Path) -> Loopback | None:
    """A loopback sshd with its keys and "remote" HOME in `folder`; None when sshd could not start (also for
    bench/bench_fleet.py). `shut` ends it."""
    keys = folder / "ssh"
    keys.mkdir()
    _keygen(keys / "host_key")
    _keygen(keys / "user_key")
    (keys / "authorized_keys").write_text((keys / "user_key.pub").read_text())
    # short: a tmux socket path must fit in 108 bytes, and pytest-xdist's tmp_path is long
    tmux_dir = Path(tempfile.mkdtemp(prefix="tc-tmux-", dir="/tmp"))
    home = folder / "remote-home"
    home.mkdir()
    port = free_port()
    (keys / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host_key'}\nPidFile {keys / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
        "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"PermitRootLogin prohibit-password\nMaxSessions {MAX_SESSIONS}\n"
        f"SetEnv TMUX_TMPDIR={tmux_dir} TELECLAUDE_DB={folder / 'remote-teleclaude.db'} HOME={home}"
        f"{_faked_clock()}\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    server = Server(keys / "sshd_config")
    if not server.start():
        shutil.rmtree(tmux_dir, ignore_errors=True)
        return None
    host_key = (keys / "host_key.pub").read_text().split()
    (keys / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    return Loopback(
        port, keys / "user_key", keys / "known_hosts", tmux_dir, folder / "remote-teleclaude.db", home, server
    )


def shut(loopback: Loopback) -> None:
    """End the remote tmux servers (with what they ran), the shared ssh connections and sshd."""
    ssh.close(computer(loopback, "/unused", loopback.home))
    for server_socket in loopback.tmux_dir.glob("tmux-*/*"):
        subprocess.run(["tmux", "-S", str(server_socket), "kill-server"], capture_output=True, check=False)
    loopback.server.kill(signal.SIGTERM)
    shutil.rmtree(loopback.tmux_dir, ignore_errors=True)


@pytest.fixture
def sshd(tmp_path) -> Iterator[Loopback]:
    if not os.access(SSHD, os.X_OK) or not shutil.which("ssh"):
        pytest.skip("sshd or ssh is not installed (.ci/run installs openssh-server and openssh-client)")
    loopback = launch(tmp_path)
    if loopback is None:
        pytest.skip("sshd could not be started")
    # a killed run skips what follows the yield
    watcher = reaper(tmux_dir=loopback.tmux_dir, pids=[loopback.server.process.pid])
    yield loopback
    shut(loopback)
    for each in (watcher, *loopback.server.watchers):
        stop(each)


def computer(loopback: Loopback, project: str, bin_dir: Path) -> Computer:
    return Computer(
        name=NAME,
        host="127.0.0.1",
        project=project,
        agents={"claude": "claude", "gemini": "gemini", "codex": "codex"},
        user=getpass.getuser(),
        port=loopback.port,
        identity_file=str(loopback.user_key),
        path=f"{bin_dir}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        ssh_options=(f"UserKnownHostsFile={loopback.known_hosts}", "StrictHostKeyChecking=yes"),
    )


def clone(project: Path, remote: Path) -> None:
    """The project's clone on the "remote" side, whose commits are the remote worker's."""
    subprocess.run(["git", "clone", "-q", str(project), str(remote)], check=True)
    for key, value in (("user.name", "remote worker"), ("user.email", "remote@teleclaude.invalid")):
        subprocess.run(["git", "config", key, value], cwd=remote, check=True)


def toml(socket_name: str, loopback: Loopback, remote: Path, bin_dir: Path | str) -> str:
    return f"""[runtime]
socket = "{socket_name}"
idle_threshold = 0.4
poll_interval = 0.05
startup_timeout = 15
settle = 0.1

[computers.{NAME}]
host = "127.0.0.1"
user = "{getpass.getuser()}"
port = {loopback.port}
identity_file = "{loopback.user_key}"
project = "{remote}"
path = "{bin_dir}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
agents = {{ {", ".join(f'{name} = "{name}"' for name in NAMES)} }}
ssh_options = ["UserKnownHostsFile={loopback.known_hosts}", "StrictHostKeyChecking=yes"]
"""


def settle_settings(project: Path, text: str, message: str) -> None:
    """`text` as the project's teleclaude.toml, trusted (`teleclaude trust`: computers need it), committed."""
    settings = project / "teleclaude.toml"
    settings.write_text(text)
    trust_store.record(settings, settings.read_bytes())
    commit_all(project, message)
