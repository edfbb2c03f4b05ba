"""`[runtime]` and `[computers.NAME]` of teleclaude.toml: the worker runtime's settings. How each agent CLI
is started and spoken to is its driver's (teleclaude/agents/), overridable under `[runtime.agents.NAME]`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from teleclaude.agents import PROFILES
from teleclaude.agents.profile import AgentProfile
from teleclaude.errors import ErrorCode, Failure


class SandboxMode(Enum):
    """`[runtime] sandbox`: `auto` when bubblewrap works here, `bwrap` always (refuse without), `off`."""

    AUTO = "auto"
    BWRAP = "bwrap"
    OFF = "off"


@dataclass(frozen=True)
class Computer:
    """`[computers.NAME]` in teleclaude.toml: another machine reached with OpenSSH, where workers run in tmux.

    `project` is a clone of this project there; the item branch travels to it before a worker starts and
    back after each turn. `agents` maps an agent name to its binary there (a name found on `path`, or a path).
    """

    name: str
    host: str
    project: str
    agents: Mapping[str, str]
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    path: str | None = None  # PATH for the workers there; else the login's default
    ssh_options: tuple[str, ...] = ()  # extra `-o KEY=VALUE` options, e.g. UserKnownHostsFile=...
    lanes: int = 0  # how many items of `teleclaude run` may have their worktree steps done there at once
    max_sessions: int = 10  # sshd's MaxSessions there: channels one ssh connection may carry (more connect)


@dataclass(frozen=True)
class Untrusted:
    """A project's teleclaude.toml that sets what starts processes, in a content the user has not trusted
    (`teleclaude trust`): those settings (`keys`, e.g. computers.box, runtime.agents.NAME.binary) were
    not applied."""

    path: str
    keys: tuple[str, ...]


class UntrustedConfig(Failure):
    code = ErrorCode.UNTRUSTED_CONFIG

    def __init__(self, untrusted: Untrusted) -> None:
        super().__init__(
            f"{untrusted.path} sets what starts processes or where notices go ({', '.join(untrusted.keys)}), "
            "and you have not trusted this content of it, so nothing is started with them"
        )
        self.untrusted = untrusted

    def explain(self) -> str:
        import os.path
        import shlex

        folder = shlex.quote(os.path.dirname(self.untrusted.path) or ".")
        return (
            f"{self}.\nRead the file; if you trust it, run `teleclaude trust --cwd {folder}` (a changed file "
            "asks again), or move those settings to ~/.config/teleclaude/teleclaude.toml."
        )


@dataclass(frozen=True)
class RuntimeConfig:
    """`[runtime]` in teleclaude.toml. Times are seconds."""

    socket: str = "teleclaude"  # the private tmux server: `tmux -L teleclaude ls`
    computers: tuple[str, ...] = ("local",)  # names that mean this machine
    remotes: Mapping[str, Computer] = field(default_factory=dict)  # [computers.NAME]: other machines
    profiles: Mapping[str, AgentProfile] = field(default_factory=lambda: dict(PROFILES))
    history_limit: int = 50_000
    width: int = 200
    height: int = 50
    startup_timeout: float = 60.0  # for the CLI's prompt to appear
    # the prompt must stay on an unchanged screen this long before typing, and the pause between pasting a
    # command and pressing Enter: None, each agent's own (its driver's `prompt_stable`, `settle`)
    prompt_stable: float | None = None
    settle: float | None = None
    command_wait: float = 30.0  # for the CLI to list a typed command (profile's `command_listed`); then sent
    idle_threshold: float = 5.0
    # a look at busy workers (a run's: up to 4 x later while nothing is new, runtime/core/looks.py); their
    # hooks and exits wake a wait at once
    poll_interval: float = 1.0
    tmux_timeout: float = 10.0
    # supervision (seconds without progress, counted from the last progress)
    soft_remind: float = 210.0  # a reminder typed at the worker's next idle
    hard_remind: float = 420.0  # an interrupting reminder (Escape first); again every (hard - soft) after
    max_nudges: int = 3  # unanswered reminders before the session's agent counts as unresponsive
    # an unresponsive agent is unavailable this long (seconds) and its step falls back to the next agent;
    # 0: the session needs attention instead and is left running for a human
    unresponsive_pause: float = 3600.0
    digest_period: float = 600.0  # a digest per worker for the orchestrator's wait_for_sessions
    digest_period_quiet: float = 300.0  # once a digest found a worker without progress
    # each digest, and a final one when a worker's turn ends, typed into its parent's pane by the supervisor
    # (`teleclaude supervise`) at the parent's next idle moment; false: the orchestrator polls as before
    parent_digests: bool = True
    # `teleclaude run` starts the agent most likely to take an item's next step to its prompt while the
    # current step works (the step that followed the same step of an earlier item in this run), and types
    # into it only when next_work names that step, agent and folder; else it ends it unused
    warm_start: bool = True
    spin_max: float = 45.0  # post-report cycle: the longest wait for the pane to be quiet
    wait_timeout: float = 600.0  # post-report cycle: the longest a wait_cmd may run
    # no output while the CLI shows it waits on its API (the profile's `api_wait`) this long: rate_limited
    api_wait_limit: float = 300.0
    # `teleclaude run`: when every agent that may take a step is out, wait this long at most for the first
    # to come back from its limit (0: stop with SELF at once, as `run --no-wait` does)
    limit_wait: float = 12 * 3600.0
    # `teleclaude run`: a worker whose computer ssh has not reached for this long is given up and its step
    # taken up elsewhere (runtime/core/given_up.py); a reboot or a flaky link is waited out. 0: never
    unreachable_wait: float = 900.0
    # workers in bubblewrap (runtime/core/sandbox.py): `auto` where it works, `bwrap` always, `off`; and
    # whether a sandboxed worker reaches the network (its model's API needs it)
    sandbox: SandboxMode = SandboxMode.AUTO
    sandbox_network: bool = True
    untrusted: Untrusted | None = None  # settings of the project file left out until the user trusts it

    def check_trusted(self) -> None:
        """Before starting a worker: refuse while the project file's settings for that are not trusted."""
        if self.untrusted is not None:
            raise UntrustedConfig(self.untrusted)

    @property
    def ssh_timeout(self) -> float:
        """For one git push, fetch or clean-up in another computer's clone over ssh."""
        return self.tmux_timeout * 6

    def prompt_stable_of(self, agent: str) -> float:
        """How long `agent`'s prompt must stay on an unchanged screen before the launcher types."""
        return self.prompt_stable if self.prompt_stable is not None else self._profile(agent).prompt_stable

    def settle_of(self, agent: str) -> float:
        """The pause between typing a line into `agent`'s pane and pressing Enter."""
        return self.settle if self.settle is not None else self._profile(agent).settle

    def _profile(self, agent: str) -> AgentProfile:
        return self.profiles.get(agent) or AgentProfile(agent, (agent,))

    def elsewhere(self, computer: str) -> bool:
        """Whether a session's `computer` is another machine; the names in `computers` mean this one."""
        return computer not in self.computers
