"""A worker on another computer in bubblewrap there (`[runtime] sandbox`), where bubblewrap works there.

Its sandbox is made of that computer's paths (adapters/remote_sandbox.py asks them over ssh; the layout is
runtime/core/sandbox.py's `remote_layout`, the argv its one `bwrap_argv`), and its command runs under the
relay that moves its hooks' marks from its channel folder there onto its pane, where the observer reads them
over ssh as a remote worker's."""

from __future__ import annotations

import logging
import threading

from teleclaude.adapters import remote_sandbox
from teleclaude.adapters import sandbox as local_sandbox
from teleclaude.agents.profile import AgentProfile
from teleclaude.config.profiles import Computer, RuntimeConfig, SandboxMode
from teleclaude.errors import Error, ErrorCode
from teleclaude.runtime.core.sandbox import Boxing, boxing, bwrap_argv, remote_layout

log = logging.getLogger("teleclaude.runtime")

# computers whose unsandboxed workers were warned about (once per process)
_WARNED: set[tuple[str, str, int | None]] = set()
_WARNED_LOCK = threading.Lock()


def sandboxed_there(
    config: RuntimeConfig,
    computer: Computer,
    session_id: str,
    slug: str,
    profile: AgentProfile,
    argv: list[str],
    env: dict[str, str],
) -> tuple[list[str], dict[str, str]] | Error:
    """The remote worker's command inside bubblewrap there, under the relay; as it is when the sandbox is off,
    or under "auto" where bubblewrap does not work there (a warning naming the computer, once). Raises
    ssh.RemoteError when the computer cannot be asked."""
    if config.sandbox is SandboxMode.OFF:  # nothing to probe
        return argv, env
    probed = remote_sandbox.probe(computer, _state_of(config, computer), config.ssh_timeout)
    chosen = boxing(config.sandbox, probed.usable)
    if chosen is not Boxing.INSIDE:
        if chosen is Boxing.REFUSED:
            return Error(
                ErrorCode.SANDBOX_UNAVAILABLE,
                f'{computer.name}: {probed.problem}, and [runtime] sandbox = "bwrap" starts no worker '
                f"outside one.\n{fix_there(computer.name)}",
            )
        with _WARNED_LOCK:
            where = (computer.name, computer.host, computer.port)
            first = where not in _WARNED
            _WARNED.add(where)
        if first:
            log.warning(
                "workers on %s are not sandboxed: %s. %s",
                computer.name,
                probed.problem,
                fix_there(computer.name),
            )
        return argv, env
    tree = remote_sandbox.tree(computer, slug, config.ssh_timeout)
    channel = remote_sandbox.channel_folder(probed.host, session_id)
    needs = profile.sandbox
    layout = remote_layout(
        probed.host,
        tree,
        state=needs.state,
        state_files=needs.state_files,
        channel=channel,
        env=needs.env,
        network=config.sandbox_network,
    )
    inside = {**env, local_sandbox.CHANNEL: channel}
    return remote_sandbox.relayed(channel, bwrap_argv(probed.bwrap, layout, argv)), inside


def fix_there(name: str) -> str:
    return (
        f"Install bubblewrap on {name} (Debian/Ubuntu: apt-get install bubblewrap) and allow user "
        "namespaces there (sysctl kernel.unprivileged_userns_clone=1, or "
        "kernel.apparmor_restrict_unprivileged_userns=0), or set [runtime] sandbox = "
        '"off" in ~/.config/teleclaude/teleclaude.toml here.'
    )


def _state_of(config: RuntimeConfig, computer: Computer) -> tuple[str, ...]:
    """The state folders of every CLI the computer has: made there once, whichever agent starts first."""
    profiles = [config.profiles[agent] for agent in computer.agents if agent in config.profiles]
    folders = (folder for profile in profiles for folder in profile.sandbox.state)
    return tuple(sorted(set(folders)))
