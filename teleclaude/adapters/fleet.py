"""This machine's tmux server and the other computers' (adapters/ssh.py `RemoteTmux`) as one `Tmux`: remote
pane ids and session names carry `NAME:` in front (`box:%3`, `box:tc-1a2b3c4d`), so the services that read
panes need not know where a pane lives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace

from teleclaude.adapters.captures import Asked
from teleclaude.adapters.ssh import DOWN_LOOK, SEPARATOR, RemoteTmux, qualify
from teleclaude.adapters.tmux import Tmux, TmuxError
from teleclaude.config.profiles import Computer
from teleclaude.runtime.core.sessions import PaneView


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
        self._tried: dict[str, float] = {}  # computer -> when its panes were last asked for (monotonic)

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

    def unread_input(self, pane_id: str) -> int | None:
        tmux, bare = self._route(pane_id)
        return super().unread_input(pane_id) if tmux is self else tmux.unread_input(bare)

    def views(self) -> dict[str, PaneView]:
        """Every pane here and on the computers in use; a computer ssh cannot reach is left out (its panes
        are not gone: `unreachable` names it) and tried again `DOWN_LOOK` seconds after its last try."""
        views = super().views()
        in_use = self.in_use()
        for name in set(self.remotes) - in_use:
            self.remotes[name].stop_listing()
        for name in sorted(in_use & set(self.remotes)):
            remote = self.remotes[name]
            if remote.down_since is not None and time.monotonic() - self._tried.get(name, 0.0) < DOWN_LOOK:
                continue
            self._tried[name] = time.monotonic()
            try:
                found = remote.views()
            except TmuxError:
                if remote.down_since is None:
                    raise  # ssh got through: tmux itself failed there
                continue
            for view in found.values():
                pane_id = qualify(remote, view.pane_id)
                views[pane_id] = replace(view, pane_id=pane_id)
        return views

    def unreachable(self) -> frozenset[str]:
        return frozenset(name for name, remote in self.remotes.items() if remote.down_since is not None)

    def glance(self, pane_id: str, press: str = "", typed: str = "") -> tuple[PaneView | None, list[str]]:
        tmux, bare = self._route(pane_id)
        if tmux is self:
            return super().glance(pane_id, press, typed)
        view, screen = tmux.glance(bare, press, typed)
        return (None if view is None else replace(view, pane_id=pane_id)), screen

    def capture(self, pane_id: str, start: int, end: int, history_size: int | None = None) -> list[str]:
        tmux, bare = self._route(pane_id)
        if tmux is self:
            return super().capture(pane_id, start, end, history_size)
        return tmux.capture(bare, start, end, history_size)

    @contextmanager
    def captured_ahead(self, asked: Sequence[Asked]) -> Iterator[None]:
        """Within: the captures `asked` of panes on other computers taken ahead, one ssh client a computer
        (`RemoteTmux.captured_ahead`); this machine's are captured as they come."""
        routed: dict[RemoteTmux, list[Asked]] = {}
        for pane_id, first, last, history in asked:
            tmux, bare = self._route(pane_id)
            if isinstance(tmux, RemoteTmux):
                routed.setdefault(tmux, []).append((bare, first, last, history))
        with ExitStack() as stack:
            for tmux, each in routed.items():
                stack.enter_context(tmux.captured_ahead(each))
            yield

    def send_text(self, pane_id: str, text: str) -> None:
        tmux, bare = self._route(pane_id)
        (super().send_text if tmux is self else tmux.send_text)(bare, text)

    def send_key(self, pane_id: str, key: str) -> None:
        tmux, bare = self._route(pane_id)
        (super().send_key if tmux is self else tmux.send_key)(bare, key)

    def clear_mark(self, pane_id: str, option: str) -> None:
        tmux, bare = self._route(pane_id)
        (super().clear_mark if tmux is self else tmux.clear_mark)(bare, option)

    def clear_marks(self, marks: Sequence[tuple[str, str]]) -> None:
        """`clear_mark` of each (pane, option), one tmux client a computer (tmux stops at a pane gone)."""
        routed: dict[Tmux, list[str]] = {}
        for pane_id, option in marks:
            tmux, bare = self._route(pane_id)
            routed.setdefault(tmux, []).extend((";", "set-option", "-p", "-u", "-t", bare, option))
        for tmux, unset in routed.items():
            tmux.cmd(*unset[1:])

    def kill_session(self, name: str) -> None:
        tmux, bare = self._route(name)
        (super().kill_session if tmux is self else tmux.kill_session)(bare)

    def _route(self, name: str) -> tuple[Tmux, str]:
        computer, sep, bare = name.partition(SEPARATOR)
        if sep and computer in self.remotes:
            return self.remotes[computer], bare
        return self, name
