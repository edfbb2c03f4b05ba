"""Send notices (`[notify]`, config/notify.py) through Apprise, off the caller's thread, in bounded time.

`load_notify` reads `[notify]` from the teleclaude.toml files and then the user's own `notify.toml`; a file
that holds URLs (other than the project's teleclaude.toml, trusted or not) must be the user's alone (mode
0600). `check_urls` asks Apprise whether it takes each URL (lint, and `teleclaude run` at its start).
`Notifier.post` never blocks and never raises: a notice passes `Quiet` (min_interval), then one thread of
its own sends it to each URL, each send bounded by `timeout`; a send that fails is logged once (by its key
and scheme, never the URL) and tried once more `RETRY_AFTER` seconds later. Apprise is imported on that
thread, at the first notice sent: commands that send nothing never load it, and its own logger is silenced
(it names URLs).
"""

from __future__ import annotations

import logging
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from teleclaude.adapters import fs
from teleclaude.adapters.settings import load_config, project_file, user_config_file
from teleclaude.config.notify import Notice, NotifyConfig, NotifyEvent, Quiet, Target
from teleclaude.config.parse import ConfigError, notify_table

log = logging.getLogger("teleclaude.notify")

NOTIFY_FILE = "notify.toml"
RETRY_AFTER = 60.0  # seconds before a notice that failed is tried once more


class NotifyFileOpen(ConfigError):
    next_step = "Make it readable by you alone (chmod 600), then call again."


def notify_path(env: Mapping[str, str] | None = None) -> Path | None:
    """`~/.config/teleclaude/notify.toml` (under `$XDG_CONFIG_HOME` when set)."""
    return user_config_file(NOTIFY_FILE, os.environ if env is None else env)


def load_notify(project_root: str | Path | None, env: Mapping[str, str] | None = None) -> NotifyConfig:
    """`[notify]` of the teleclaude.toml files (a project file's URLs only once trusted), then of the user's
    notify.toml; raises ConfigError (a group- or world-readable file holding URLs: NotifyFileOpen)."""
    config = load_config(project_root, env).notify
    path = notify_path(env)
    text = _read_private(path) if path is not None else None
    if path is not None and text is not None:
        config = _notify_file(str(path), text, config)
    project = str(project_file(project_root)) if project_root is not None else None
    for source in dict.fromkeys(target.path for target in config.targets):
        if source != project:
            _check_private(Path(source))
    return config


def _notify_file(path: str, text: str, earlier: NotifyConfig) -> NotifyConfig:
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(path, None, f"not valid TOML ({error})") from None
    for key in data:
        if key != "notify":
            raise ConfigError(path, key, "unknown key; this file holds only the [notify] table")
    return notify_table(path, data["notify"], earlier) if "notify" in data else earlier


def _read_private(path: Path) -> str | None:
    if not path.exists():
        return None
    _check_private(path)
    data = fs.read_bytes(path)
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError as error:
        problem = f"is not UTF-8 text ({error.reason} at byte {error.start})"
        raise ConfigError(str(path), None, problem) from None


def _check_private(path: Path) -> None:
    """A file holding notify URLs: a regular file of this user's that nobody else may read or write."""
    try:
        info = path.stat()
    except OSError as error:
        raise ConfigError(str(path), None, f"cannot be read ({error.strerror or error})") from None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        raise NotifyFileOpen(str(path), None, "holds notify URLs but is not a regular file of yours")
    if info.st_mode & 0o077:
        raise NotifyFileOpen(
            str(path),
            None,
            f"holds notify URLs (secrets) and others may read it (mode {stat.S_IMODE(info.st_mode):04o}): "
            f"chmod 600 {path}",
        )


def checked(project_root: str | Path | None, env: Mapping[str, str] | None = None) -> NotifyConfig:
    """`load_notify`, each URL checked by Apprise (`lint`, and `teleclaude run` before it starts)."""
    config = load_notify(project_root, env)
    check_urls(config)
    return config


# --- Apprise -----------------------------------------------------------------------------------------------


def _apprise() -> ModuleType:
    # their messages name the URLs (a secret in their host or path): kept out of every log, before the import
    for name in ("apprise", "urllib3"):
        logging.getLogger(name).propagate = False
    import apprise

    return apprise


def check_urls(config: NotifyConfig) -> None:
    """Raises ConfigError naming the first URL Apprise does not take: its file and key, never the URL."""
    if not config.targets:
        return
    apprise = _apprise()
    schemes = {scheme.lower() for scheme in apprise.NotificationManager().schemas()}
    for target in config.targets:
        if target.scheme not in schemes:
            raise ConfigError(
                target.path,
                target.key,
                f"Apprise knows no service {target.scheme}:// (see https://github.com/caronc/apprise/wiki)",
            )
        if apprise.Apprise.instantiate(target.url, suppress_exceptions=True) is None:
            raise ConfigError(
                target.path, target.key, f"is not a URL Apprise takes for {target.scheme}:// (see its wiki)"
            )


def send(target: Target, notice: Notice, timeout: float) -> str | None:
    """Send `notice` to one URL, here; None when the service took it, else why not (never the URL)."""
    try:
        apprise = _apprise()
        plugin = apprise.Apprise.instantiate(target.url, suppress_exceptions=True)
        if plugin is None:
            return "Apprise does not take this URL"
        for name in ("socket_connect_timeout", "socket_read_timeout"):
            if hasattr(plugin, name):
                setattr(plugin, name, timeout)
        sender = apprise.Apprise()
        sender.add(plugin)
        kind = apprise.NotifyType.INFO if notice.event is None else apprise.NotifyType.WARNING
        taken = sender.notify(
            body=notice.body,
            title=notice.title,
            notify_type=kind,
            body_format=apprise.NotifyFormat.TEXT,
            timeout=timeout,
        )
    except Exception as error:  # a plugin's own failure: its words may hold the URL, its type does not
        return f"failed ({type(error).__name__})"
    return None if taken else "the service did not take it"


def send_all(targets: tuple[Target, ...], notice: Notice, timeout: float) -> dict[Target, str | None]:
    """`send` to each target at once, each on a thread of its own; a send still under way after `timeout`
    (and a second for Apprise's own start) counts as failed and is left to end by itself."""
    results: dict[Target, str | None] = {}

    def one(target: Target) -> None:
        results[target] = send(target, notice, timeout)

    threads = [threading.Thread(target=one, args=(t,), daemon=True, name="notify-send") for t in targets]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + 1.0
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))
    late = f"no answer in {timeout:g} s"
    return {target: results.get(target, late) for target in targets}


# --- the notifier ------------------------------------------------------------------------------------------

_CLOSE = object()


class Notifier:
    """Posts notices from anywhere (the run's loop, the supervisor) to a thread of its own."""

    def __init__(
        self,
        config: NotifyConfig,
        clock: Callable[[], float] = time.monotonic,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        self.config = config
        self.clock = clock
        self.retry_after = retry_after
        self._quiet = Quiet(config.min_interval)
        self._lock = threading.Lock()
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._retries: list[tuple[float, Target, Notice]] = []

    def post(self, notice: Notice) -> None:
        """Send `notice` unless its event is not wanted or it was sent within min_interval; never waits."""
        if not self.config.wants(notice.event):
            return
        with self._lock:
            self._quiet, admitted = self._quiet.admit(notice, self.clock())
            if not admitted:
                log.debug("notice %s: sent less than min_interval ago, not again", notice.key)
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, daemon=True, name="notify")
                self._thread.start()
        self._queue.put(notice)

    def close(self) -> None:
        """Let what is queued be sent, for at most `timeout` (and a second) more: the process may end then."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        self._queue.put(_CLOSE)
        thread.join(self.config.timeout + 2.0)

    def _work(self) -> None:
        while True:
            due = min((at for at, _, _ in self._retries), default=None)
            wait = None if due is None else max(due - self.clock(), 0.0)
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                item = None
            if item is _CLOSE:
                return
            if isinstance(item, Notice):
                self._deliver(self.config.targets, item, retry=True)
            self._retry_due()

    def _deliver(self, targets: tuple[Target, ...], notice: Notice, retry: bool) -> None:
        for target, why in send_all(targets, notice, self.config.timeout).items():
            if why is None:
                continue
            what = notice.event.value if notice.event else "digest"
            if retry:
                log.warning(
                    "notify: %s: the %s notice was not sent (%s); trying once more in %s s",
                    target.shown,
                    what,
                    why,
                    f"{self.retry_after:g}",
                )
                self._retries.append((self.clock() + self.retry_after, target, notice))
            else:
                log.info("notify: %s: the %s notice was not sent again (%s)", target.shown, what, why)

    def _retry_due(self) -> None:
        now = self.clock()
        due = [(target, notice) for at, target, notice in self._retries if at <= now]
        self._retries = [entry for entry in self._retries if entry[0] > now]
        for target, notice in due:
            self._deliver((target,), notice, retry=False)


def tell(project_root: str | Path, notice: Notice, env: Mapping[str, str] | None = None) -> None:
    """One notice from a command that is over once it is sent (`teleclaude finalize`): sent within the
    timeout, unless the command runs as a worker of a `teleclaude run` (whose own notices say it). A file
    or URL that is not right is logged, not raised: the command's own answer comes first."""
    env = os.environ if env is None else env
    if _in_a_run(env.get("TELECLAUDE_SESSION_ID", "")):
        return
    try:
        config = load_notify(project_root, env)
    except ConfigError as error:
        log.warning("notify: nothing is sent: %s", error)
        return
    notifier = notifier_for(config)
    if notifier is not None:
        notifier.post(notice)
        notifier.close()


def _in_a_run(session_id: str) -> bool:
    if not session_id:
        return False
    from teleclaude.adapters.sessions_db import SessionStore

    try:
        session = SessionStore().get(session_id)
    except Exception:  # the database, for a moment: a message too many beats one missing
        return False
    return session is not None and bool(session.run_id)


def notifier_for(config: NotifyConfig) -> Notifier | None:
    """A notifier when there is somewhere to send; None (nothing is ever imported or started) otherwise."""
    return Notifier(config) if config.targets else None


__all__ = ["Notifier", "NotifyEvent", "check_urls", "load_notify", "notifier_for", "send", "send_all", "tell"]
