"""Read `teleclaude.toml` texts (user file, then project file) into a `Config`.

The files are validated one by one so an error names the file it is in; then later files override earlier
ones key by key, and matrix rows one by one. Of a file the user has not trusted (a project's, until
`teleclaude trust`), the settings that start processes (`EXECUTABLE`) are checked but not applied: the
`Config` names them (`RuntimeConfig.untrusted`), and the runtime refuses to start workers while it does.
`[notify] urls` counts among them: a project file could send what a run does (item titles, paths) elsewhere.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from teleclaude.agents import NAMES
from teleclaude.agents.profile import AgentProfile
from teleclaude.config.checks import EXECUTABLE_CHECKS_KEYS, Checks, parse_checks
from teleclaude.config.matrix import DEFAULT_MATRIX, THINKING_MODES, Config
from teleclaude.config.notify import NotifyConfig, NotifyProblem, parse_notify
from teleclaude.config.profiles import Computer, RuntimeConfig, SandboxMode, Untrusted
from teleclaude.config.spend import SpendConfig, SpendError, parse_budget, parse_prices
from teleclaude.errors import ErrorCode, Failure
from teleclaude.planner.core.model import AgentChoice

TOP_LEVEL_KEYS = (
    "agents",
    "budget",
    "checks",
    "computers",
    "max_review_rounds",
    "matrix",
    "notify",
    "prices",
    "runtime",
)
_AGENT_NAME = re.compile(r"[a-z][a-z0-9_-]*")


class ConfigError(Failure, ValueError):
    code = ErrorCode.INVALID_CONFIG
    next_step = "Fix the file, then call again."

    def __init__(self, path: str, key: str | None, problem: str) -> None:
        where = f"{path}: {key}" if key else path
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.key = key


@dataclass(frozen=True)
class _Row:
    path: str
    choices: tuple[AgentChoice, ...]


def parse_config(sources: Sequence[tuple[str, str]], untrusted: Collection[str] = ()) -> Config:
    """`untrusted`: the paths among `sources` whose settings that start processes are left out."""
    if not sources:
        return Config()
    agents: tuple[str, ...] = NAMES
    max_review_rounds = Config().max_review_rounds
    headroom = Config().headroom
    runtime = None
    checks: Checks | None = None
    remotes: dict[str, Computer] = {}
    withheld = None
    notify = None
    spend: SpendConfig | None = None
    rows = {task: _Row("", row) for task, row in DEFAULT_MATRIX.items()}
    for path, text in sources:
        data = _load(path, text)
        if path in untrusted:
            _check_executable(path, data)  # a file is checked whole, trusted or not
            data, held = split_executable(data)
            withheld = Untrusted(path, tuple(held)) if held else withheld
        if "agents" in data:
            agents = _agents(path, data["agents"])
        if "max_review_rounds" in data:
            max_review_rounds = _max_review_rounds(path, data["max_review_rounds"])
        for task, row in _matrix(path, data.get("matrix", {})).items():
            rows[task] = _Row(path, row)
        if "headroom" in data.get("matrix", {}):
            headroom = _headroom(path, data["matrix"]["headroom"])
        if "runtime" in data:
            runtime = _runtime(path, data["runtime"], runtime)
        if "computers" in data:
            remotes.update(_computers(path, data["computers"]))
        if "notify" in data:
            notify = notify_table(path, data["notify"], notify)
        if "checks" in data:
            checks = parse_checks(path, data["checks"], checks)
        if "prices" in data:
            spend = _spend(parse_prices, path, data["prices"], spend)
        if "budget" in data:
            spend = _spend(parse_budget, path, data["budget"], spend)
    if remotes:
        runtime = replace(runtime or RuntimeConfig(), remotes=remotes)
        _check_remote_names(runtime)
    if withheld:
        runtime = replace(runtime or RuntimeConfig(), untrusted=withheld)
    _check_new_agents_are_listed(rows, agents)
    return Config(
        matrix={task: row.choices for task, row in rows.items()},
        agents=agents,
        max_review_rounds=max_review_rounds,
        headroom=headroom,
        runtime=runtime,
        notify=notify or NotifyConfig(),
        checks=checks,
        spend=spend or SpendConfig(),
    )


def _spend(
    parse: Callable[[str, Any, SpendConfig | None], SpendConfig],
    path: str,
    value: Any,
    earlier: SpendConfig | None,
) -> SpendConfig:
    """One file's `[prices]` or `[budget]` (config/spend.py), its problem as this file's ConfigError."""
    try:
        return parse(path, value, earlier)
    except SpendError as problem:
        raise ConfigError(path, problem.key, str(problem).removeprefix(f"{path}: {problem.key}: ")) from None


def notify_table(path: str, value: Any, earlier: NotifyConfig | None = None) -> NotifyConfig:
    """One file's `[notify]` (config/notify.py), its problem as this file's ConfigError."""
    try:
        return parse_notify(path, value, earlier)
    except NotifyProblem as problem:
        raise ConfigError(path, problem.key, problem.problem) from None


def _load(path: str, text: str) -> dict[str, Any]:
    import tomllib  # only when there is a file: the planner starts faster without it (a test holds this)

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(path, None, f"not valid TOML ({error})") from None
    _check_keys(path, data)
    return data


# --- what only a trusted file may set ----------------------------------------------------------------------

# [runtime.agents.NAME] keys that pick the program a worker runs, its flags, its environment, or what is typed
# into it (`command_sign = "!"` is a shell escape in some CLIs); the rest are regexes for its screen
EXECUTABLE_PROFILE_KEYS = ("binary", "args", "modes", "env", "command_prefix", "command_sign")


def split_executable(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A checked file's TOML as (what any file may set, what starts processes): the second maps dotted keys
    to their values. Every [computers.NAME] (host, ssh options, binaries and PATH there), [runtime] computers
    (which names run here), the EXECUTABLE_PROFILE_KEYS of each driver's [runtime.agents.NAME], the whole
    table of an agent that is not one of the drivers (it runs the program NAME), [notify] urls (where word
    of the run is sent), and [checks] gate and setup."""
    kept = {key: value for key, value in data.items() if key != "computers"}
    held: dict[str, Any] = {f"computers.{name}": table for name, table in data.get("computers", {}).items()}
    if isinstance(data.get("notify"), dict) and "urls" in data["notify"]:
        kept["notify"] = {key: value for key, value in data["notify"].items() if key != "urls"}
        held["notify.urls"] = data["notify"]["urls"]
    if isinstance(data.get("checks"), dict):
        checks = dict(data["checks"])
        held.update({f"checks.{key}": checks.pop(key) for key in EXECUTABLE_CHECKS_KEYS if key in checks})
        kept["checks"] = checks
    if "runtime" in data:
        runtime = dict(data["runtime"])
        if "computers" in runtime:
            held["runtime.computers"] = runtime.pop("computers")
        for key in ("sandbox", "sandbox_network"):  # what a worker may reach: never widened by a cloned repo
            if key in runtime:
                held[f"runtime.{key}"] = runtime.pop(key)
        profiles = {}
        for name, table in runtime.get("agents", {}).items():
            if name not in NAMES:  # no driver of that name: the table makes one that runs `name` from PATH
                held[f"runtime.agents.{name}"] = table
                continue
            for key in EXECUTABLE_PROFILE_KEYS:
                if key in table:
                    held[f"runtime.agents.{name}.{key}"] = table[key]
            rest = {key: value for key, value in table.items() if key not in EXECUTABLE_PROFILE_KEYS}
            if rest:
                profiles[name] = rest
        if "agents" in runtime:
            runtime["agents"] = profiles
        kept["runtime"] = runtime
    return kept, held


def executable_settings(path: str, text: str) -> dict[str, Any]:
    """What of one file starts processes (dotted key -> value), once the file is checked."""
    data = _load(path, text)
    _check_executable(path, data)
    return split_executable(data)[1]


def relative_programs(path: str, text: str) -> dict[str, str]:
    """The programs a checked file names by a path relative to its folder (`binary = "tools/agent"`, run
    from the project, not from PATH): dotted key -> the path as written."""
    data = _load(path, text)
    _check_executable(path, data)
    found = {}
    for name, table in data.get("runtime", {}).get("agents", {}).items():
        binary = table.get("binary")
        if binary is not None and _in_folder(binary):
            found[f"runtime.agents.{name}.binary"] = binary
    return found


def _in_folder(value: str) -> bool:
    """A path relative to the file's folder: it names a folder and is not absolute (a bare name is looked
    up on PATH)."""
    return "/" in value and not value.startswith("/")


def _beside(path: str, key: str, value: str) -> str:
    """`value`, a path relative to the folder of the file at `path`, made absolute; one that leads out of
    that folder is refused (`..`; a link out of it is refused when the file is trusted)."""
    inside = posixpath.normpath(value)
    if inside == ".." or inside.startswith("../"):
        raise ConfigError(path, key, f"{value!r} leads outside the folder of {posixpath.basename(path)}")
    return posixpath.join(posixpath.dirname(path), inside)


def _check_executable(path: str, data: dict[str, Any]) -> None:
    """Check the tables that hold what starts processes, as if they were applied."""
    if "runtime" in data:
        _runtime(path, data["runtime"], None)
    if "computers" in data:
        _computers(path, data["computers"])
    if "notify" in data:
        notify_table(path, data["notify"])
    if "checks" in data:
        parse_checks(path, data["checks"])


def _check_keys(path: str, data: dict[str, Any]) -> None:
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(path, key, f"unknown key; the keys are {', '.join(TOP_LEVEL_KEYS)}")


def _agents(path: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(
            path, "agents", f'must be a non-empty list of agent names, e.g. ["{NAMES[0]}", "{NAMES[-1]}"]'
        )
    for name in value:
        _check_agent_name(path, "agents", name)
    return tuple(dict.fromkeys(value))


def _max_review_rounds(path: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(path, "max_review_rounds", f"must be a whole number of at least 1, not {value!r}")
    return value


def _matrix(path: str, value: Any) -> dict[str, tuple[AgentChoice, ...]]:
    if not isinstance(value, dict):
        raise ConfigError(path, "matrix", "must be a table: [matrix] with one row per task")
    return {task: _matrix_row(path, task, row) for task, row in value.items() if task != "headroom"}


def _headroom(path: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 100:
        raise ConfigError(path, "matrix.headroom", f"must be a percentage from 1 to 100, not {value!r}")
    return float(value)


def _matrix_row(path: str, task: str, row: Any) -> tuple[AgentChoice, ...]:
    key = f"matrix.{task}"
    if task not in DEFAULT_MATRIX:
        raise ConfigError(
            path, key, f"unknown task; the tasks are {', '.join(DEFAULT_MATRIX)} (and the key headroom)"
        )
    if not isinstance(row, list) or not row:
        raise ConfigError(
            path, key, f'must be a non-empty list such as ["{NAMES[0]}:med", "{NAMES[-1]}:fast"]'
        )
    return tuple(_choice(path, f"{key}[{index}]", entry) for index, entry in enumerate(row))


def _choice(path: str, key: str, entry: Any) -> AgentChoice:
    agent, sep, mode = entry.partition(":") if isinstance(entry, str) else ("", "", "")
    if not sep or mode not in THINKING_MODES:
        raise ConfigError(
            path, key, f'must be "agent:mode" with mode one of {", ".join(THINKING_MODES)}, not {entry!r}'
        )
    _check_agent_name(path, key, agent)
    return AgentChoice(agent, mode)


def _check_agent_name(path: str, key: str, name: Any) -> None:
    if not isinstance(name, str) or not _AGENT_NAME.fullmatch(name):
        raise ConfigError(path, key, f"{name!r} is not an agent name (a lowercase word such as {NAMES[0]})")


def _check_new_agents_are_listed(rows: dict[str, _Row], agents: tuple[str, ...]) -> None:
    """A known agent missing from `agents` is simply not installed; an unknown one is most likely a typo."""
    for task, row in rows.items():
        for index, choice in enumerate(row.choices):
            if choice.agent not in NAMES and choice.agent not in agents:
                raise ConfigError(
                    row.path,
                    f"matrix.{task}[{index}]",
                    f"agent {choice.agent!r} is not one of {', '.join(NAMES)}; "
                    "a new agent must also be listed in agents",
                )


# --- [runtime] ---------------------------------------------------------------------------------------------

_RUNTIME_NUMBERS = (
    "history_limit",
    "width",
    "height",
    "startup_timeout",
    "settle",
    "command_wait",
    "prompt_stable",
    "idle_threshold",
    "poll_interval",
    "tmux_timeout",
    "soft_remind",
    "hard_remind",
    "max_nudges",
    "unresponsive_pause",
    "digest_period",
    "digest_period_quiet",
    "spin_max",
    "wait_timeout",
    "api_wait_limit",
    "limit_wait",
    "unreachable_wait",
)
_PROFILE_KEYS = (
    "binary",
    "args",
    "modes",
    "prompt",
    "busy",
    "retry",
    "api_wait",
    "tool_running",
    "limit_patterns",
    "command_prefix",
    "command_sign",
    "command_listed",
    "env",
)
_MAY_BE_ZERO = ("limit_wait", "unresponsive_pause", "unreachable_wait")  # 0: off
_MAY_BE_EMPTY = ("command_prefix", "busy", "retry", "api_wait", "tool_running", "command_listed")  # "": none
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _runtime(path: str, value: Any, earlier: RuntimeConfig | None) -> RuntimeConfig:
    runtime = earlier or RuntimeConfig()
    if not isinstance(value, dict):
        raise ConfigError(path, "runtime", "must be a table: [runtime]")
    for key, item in value.items():
        where = f"runtime.{key}"
        if key == "socket":
            if not isinstance(item, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", item):
                raise ConfigError(path, where, "must be a socket name made of letters, digits, _ . -")
            runtime = replace(runtime, socket=item)
        elif key == "computers":
            if not isinstance(item, list) or not all(isinstance(name, str) and name for name in item):
                raise ConfigError(
                    path, where, 'must be a list of names for this machine, e.g. ["local", "box"]'
                )
            runtime = replace(runtime, computers=tuple(dict.fromkeys(["local", *item])))
        elif key in _RUNTIME_NUMBERS:
            least = "0 or more" if key in _MAY_BE_ZERO else "a positive number"
            if isinstance(item, bool) or not isinstance(item, int | float) or item < 0:
                raise ConfigError(path, where, f"must be {least}, not {item!r}")
            if item == 0 and key not in _MAY_BE_ZERO:
                raise ConfigError(path, where, f"must be {least}, not {item!r}")
            whole = isinstance(getattr(RuntimeConfig(), key), int)  # else seconds (None: the agent's own)
            number: Any = int(item) if whole else float(item)
            runtime = replace(runtime, **{key: number})
        elif key == "agents":
            runtime = replace(runtime, profiles=_profiles(path, item, runtime.profiles))
        elif key == "sandbox":
            modes = [mode.value for mode in SandboxMode]
            if item not in modes:
                raise ConfigError(path, where, f"must be one of {', '.join(modes)}, not {item!r}")
            runtime = replace(runtime, sandbox=SandboxMode(item))
        elif key in ("parent_digests", "warm_start", "sandbox_network"):
            if not isinstance(item, bool):
                raise ConfigError(path, where, f"must be true or false, not {item!r}")
            flag: Any = item
            runtime = replace(runtime, **{key: flag})
        else:
            keys = ", ".join(
                (
                    *("socket", "computers", "agents", "parent_digests", "warm_start"),
                    *("sandbox", "sandbox_network", *_RUNTIME_NUMBERS),
                )
            )
            raise ConfigError(path, where, f"unknown key; the keys are {keys}")
    return runtime


def _profiles(path: str, value: Any, profiles: Mapping[str, AgentProfile]) -> dict[str, AgentProfile]:
    if not isinstance(value, dict):
        raise ConfigError(path, "runtime.agents", "must be a table: [runtime.agents.NAME]")
    merged = dict(profiles)
    for name, table in value.items():
        _check_agent_name(path, "runtime.agents", name)
        where = f"runtime.agents.{name}"
        if not isinstance(table, dict):
            raise ConfigError(path, where, "must be a table")
        profile = merged.get(name) or AgentProfile(name, (name,))
        merged[name] = _profile(path, where, table, profile)
    return merged


def _profile(path: str, where: str, table: dict[str, Any], profile: AgentProfile) -> AgentProfile:
    changes: dict[str, Any] = {}
    for key, item in table.items():
        if key not in _PROFILE_KEYS:
            raise ConfigError(path, f"{where}.{key}", f"unknown key; the keys are {', '.join(_PROFILE_KEYS)}")
        if key == "binary":
            binary = _string(path, f"{where}.binary", item)
            if _in_folder(binary):
                binary = _beside(path, f"{where}.binary", binary)
            changes["binaries"] = (binary,)
        elif key in ("args", "limit_patterns"):
            changes[key] = _strings(path, f"{where}.{key}", item)
        elif key == "modes":
            if not isinstance(item, dict) or not set(item) <= set(THINKING_MODES):
                raise ConfigError(
                    path, f"{where}.modes", f"must map {', '.join(THINKING_MODES)} to flag lists"
                )
            changes["modes"] = {
                **profile.modes,
                **{m: _strings(path, f"{where}.modes.{m}", f) for m, f in item.items()},
            }
        elif key == "env":
            changes["env"] = {**profile.env, **_env(path, f"{where}.env", item)}
        else:
            changes[key] = _string(path, f"{where}.{key}", item, allow_empty=key in _MAY_BE_EMPTY)
    regexes = ("prompt", "busy", "retry", "api_wait", "tool_running", "command_listed")
    patterns = [(key, changes[key]) for key in regexes if changes.get(key)]
    patterns += [("limit_patterns", pattern) for pattern in changes.get("limit_patterns", ())]
    for key, pattern in patterns:
        _check_regex(path, f"{where}.{key}", pattern)
    return replace(profile, **changes)


def _env(path: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(path, key, 'must be a table of strings, e.g. {IS_SANDBOX = "1"}')
    for name, item in value.items():
        if not _ENV_NAME.fullmatch(name) or name.startswith("TELECLAUDE_"):
            raise ConfigError(path, f"{key}.{name}", "is not a variable name a worker may be given")
        if not isinstance(item, str) or "\0" in item:
            raise ConfigError(path, f"{key}.{name}", f"must be a string, not {item!r}")
    return dict(value)


def _string(path: str, key: str, value: Any, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or not (value or allow_empty):
        raise ConfigError(path, key, f"must be a non-empty string, not {value!r}")
    return value


def _strings(path: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(path, key, f"must be a list of strings, not {value!r}")
    return tuple(value)


def _check_regex(path: str, key: str, pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as error:
        raise ConfigError(path, key, f"is not a valid regular expression ({error})") from None


# --- [computers.NAME] --------------------------------------------------------------------------------------

_COMPUTER_KEYS = (
    "host",
    "user",
    "port",
    "identity_file",
    "project",
    "agents",
    "path",
    "ssh_options",
    "lanes",
    "max_sessions",
)
# what reaches ssh's command line must not look like an option (`-oProxyCommand=...`) or hold a space
_SSH_WORD = re.compile(r"[A-Za-z0-9_.@%+\[\]:][A-Za-z0-9_.@%+\[\]:-]*")


def _computers(path: str, value: Any) -> dict[str, Computer]:
    if not isinstance(value, dict):
        raise ConfigError(path, "computers", "must be a table: [computers.NAME] with host, project, agents")
    return {name: _computer(path, name, table) for name, table in value.items()}


def _computer(path: str, name: str, table: Any) -> Computer:
    where = f"computers.{name}"
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise ConfigError(path, where, "a computer's name is a lowercase word such as box or loopback-ssh")
    if not isinstance(table, dict):
        raise ConfigError(path, where, "must be a table")
    for key in table:
        if key not in _COMPUTER_KEYS:
            raise ConfigError(
                path, f"{where}.{key}", f"unknown key; the keys are {', '.join(_COMPUTER_KEYS)}"
            )
    for key in ("host", "project", "agents"):
        if key not in table:
            raise ConfigError(path, f"{where}.{key}", "is missing")
    port = table.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise ConfigError(path, f"{where}.port", f"must be a TCP port number, not {port!r}")
    lanes = table.get("lanes", 0)
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 0:
        raise ConfigError(path, f"{where}.lanes", f"must be a whole number of at least 0, not {lanes!r}")
    sessions = table.get("max_sessions", 10)
    if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 1:
        raise ConfigError(
            path, f"{where}.max_sessions", f"must be sshd's MaxSessions there (at least 1), not {sessions!r}"
        )
    project = _string(path, f"{where}.project", table["project"])
    if not project.startswith("/"):
        raise ConfigError(path, f"{where}.project", "must be an absolute path on that computer")
    agents = table["agents"]
    if not isinstance(agents, dict) or not agents:
        raise ConfigError(
            path, f"{where}.agents", f'must map agent names to binaries, e.g. {{{NAMES[0]} = "{NAMES[0]}"}}'
        )
    for agent, binary in agents.items():
        _check_agent_name(path, f"{where}.agents", agent)
        _string(path, f"{where}.agents.{agent}", binary)
    options = _strings(path, f"{where}.ssh_options", table.get("ssh_options", []))
    for option in options:
        if not re.fullmatch(r"[A-Za-z]+=[^\s]+", option):
            raise ConfigError(path, f"{where}.ssh_options", f"{option!r} is not an option KEY=VALUE")
    return Computer(
        name=name,
        host=_ssh_word(path, f"{where}.host", table["host"]),
        project=project,
        agents=dict(agents),
        user=_ssh_word(path, f"{where}.user", table["user"]) if "user" in table else None,
        port=port,
        identity_file=_identity_file(path, f"{where}.identity_file", table["identity_file"])
        if "identity_file" in table
        else None,
        path=_string(path, f"{where}.path", table["path"]) if "path" in table else None,
        ssh_options=options,
        lanes=lanes,
        max_sessions=sessions,
    )


def _identity_file(path: str, key: str, value: Any) -> str:
    """An absolute path or `~/...` as it is; a relative one is beside the file that names it."""
    name = _string(path, key, value)
    return name if name.startswith(("/", "~")) else _beside(path, key, name)


def _ssh_word(path: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not _SSH_WORD.fullmatch(value):
        raise ConfigError(path, key, f"{value!r} is not a host or user name (letters, digits, . _ - @ :)")
    return value


def _check_remote_names(runtime: RuntimeConfig) -> None:
    for name in runtime.remotes:
        if name in runtime.computers:
            raise ConfigError(
                "teleclaude.toml", f"computers.{name}", "names this machine in [runtime] computers too"
            )
