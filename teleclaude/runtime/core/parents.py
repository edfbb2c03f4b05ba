"""A worker's parent: whoever dispatched it and is woken with its digests (seed 003 §B).

Pure. A parent is stored on the worker's session as one string: `session:ID` (a teleclaude session, e.g. an
orchestrator the runtime itself started) or `pane:SOCKET:%N` (an agent CLI in a tmux pane: the socket path
of its tmux server and the pane's id, as `$TMUX` and `$TMUX_PANE` name them in its process tree).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from teleclaude.agents.profile import AgentProfile
from teleclaude.runtime.core.blockers import find_blocker
from teleclaude.runtime.core.screens import waiting_for_input

_PANE = re.compile(r"%\d+")
_SESSION = re.compile(r"[0-9a-f]{8}")


@dataclass(frozen=True)
class Parent:
    session_id: str = ""  # a teleclaude session
    socket: str = ""  # else a pane: its tmux server's socket path
    pane: str = ""

    def encode(self) -> str:
        return f"session:{self.session_id}" if self.session_id else f"pane:{self.socket}:{self.pane}"


def decode(text: str) -> Parent | None:
    """The stored parent; None for none (or a string no version of teleclaude wrote)."""
    kind, _, rest = text.partition(":")
    if kind == "session" and _SESSION.fullmatch(rest):
        return Parent(session_id=rest)
    socket, _, pane = rest.rpartition(":")
    if kind == "pane" and socket.startswith("/") and _PANE.fullmatch(pane):
        return Parent(socket=socket, pane=pane)
    return None


def from_env(env: Mapping[str, str]) -> Parent | None:
    """The parent an environment names: the teleclaude session it runs in, else its tmux pane (`$TMUX` is
    `SOCKET,PID,SESSION`), else None (not in tmux)."""
    session = env.get("TELECLAUDE_SESSION_ID", "")
    if _SESSION.fullmatch(session):
        return Parent(session_id=session)
    socket = env.get("TMUX", "").split(",")[0]
    pane = env.get("TMUX_PANE", "")
    if socket.startswith("/") and _PANE.fullmatch(pane):
        return Parent(socket=socket, pane=pane)
    return None


def named(text: str, env: Mapping[str, str]) -> Parent | None:
    """A parent named explicitly: a session id, a stored form, or a pane id (`%3`) of the tmux server the
    environment is in."""
    text = text.strip()
    if _SESSION.fullmatch(text):
        return Parent(session_id=text)
    if _PANE.fullmatch(text):
        socket = env.get("TMUX", "").split(",")[0]
        return Parent(socket=socket, pane=text) if socket.startswith("/") else None
    return decode(text)


def agent_of(argv: list[str], profiles: Mapping[str, AgentProfile]) -> str:
    """The agent CLI a process runs, from its command line: a binary of its profile, run itself or by
    an interpreter (`node …/NAME.js`), or its native build (`…/NAME.exe`)."""
    for word in argv[:2]:
        name = word.rsplit("/", 1)[-1].removesuffix(".exe").removesuffix(".js")
        for agent, profile in profiles.items():
            if name in profile.binaries or name == agent:
                return agent
    return ""


def idle(screen: list[str], agent: str, profiles: Mapping[str, AgentProfile]) -> bool:
    """The parent waits at its prompt with nothing typed (each profile's prompt rule matches only an empty
    input line) and no dialog is open: a digest typed now is taken as its next message, not into a dialog
    or a half-typed line. A parent of an unknown agent is idle when some agent's rules say so."""
    candidates = [agent] if agent in profiles else list(profiles)
    if any(find_blocker(name, screen) is not None for name in candidates):
        return False
    return any(waiting_for_input(screen, profiles[name].prompt, profiles[name].busy) for name in candidates)
