"""Actions as the plain text an orchestrator executes literally (docs/design.md §2), or as structured data."""

from __future__ import annotations

from datetime import datetime

from teleclaude.errors import Error, FrontEnd, call
from teleclaude.planner.core.model import (
    Action,
    AgentMarked,
    AgentReport,
    Complete,
    Dispatch,
    Prepared,
    RunYourself,
    Unavailability,
    UsageWindow,
)
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.core.timeparse import format_duration, format_utc
from teleclaude.planner.core.usage_line import usage_text as usage_text  # the board's and the runtime's too


def to_text(action: Action | AgentMarked | AgentReport, front_end: FrontEnd = FrontEnd.CLI) -> str:
    """The answer as text safe for a terminal: values from users, agents and files are `printable`. The next
    steps it names are spelled for `front_end`: a CLI verb on the command line, a tool over MCP."""
    match action:
        case AgentMarked(agent=agent, until=None):
            return f"OK: {printable(agent)} is available."
        case AgentMarked(agent=agent, until=datetime() as until, reason=reason, now=datetime() as now) if (
            until <= now
        ):
            passed = f"{format_utc(until)} has already passed ({printable(reason)})"
            return f"OK: {printable(agent)} is available: {passed}."
        case AgentMarked(agent=agent, until=datetime() as until, reason=reason):
            work, prepare = (call(tool).spelled(front_end) for tool in ("next_work", "next_prepare"))
            return (
                f"OK: {printable(agent)} is unavailable until {format_utc(until)} ({printable(reason)}).\n"
                f"{work} and {prepare} now fall back to the next agent."
            )
        case AgentReport():
            return _agent_table(action)
        case Dispatch():
            return _tool_call(action)
        case Prepared(slug=slug):
            return (
                f"PREPARED:\ntodos/{slug} is ready for work.\n"
                f"Run {call('next_work').spelled(front_end)} to start the build/review cycle."
            )
        case Complete(slug=slug, archive=archive):
            return f"COMPLETE:\ntodos/{slug} has been finalized.\nDelivered to {archive}"
        case RunYourself():
            return _run_yourself(action, front_end)
        case Error(code=code, message=message, next_step=next_step):
            text = f"ERROR: {code.value}\n{printable(message, keep_newlines=True)}"
            return text if next_step is None else f"{text}\nNext: {printable(next_step.spelled(front_end))}"
    raise TypeError(f"not an action: {action!r}")


def to_dict(action: Action) -> dict[str, str | None]:
    """The action as flat data; every key is present, None where it does not apply."""
    data: dict[str, str | None] = dict.fromkeys(
        (
            "kind",
            "code",
            "slug",
            "command",
            "args",
            "agent",
            "thinking_mode",
            "subfolder",
            "project",
            "note",
            "reason",
        )
    )
    match action:
        case Dispatch():
            data |= dict(
                kind="dispatch",
                slug=action.slug,
                command=action.command,
                args=action.slug,
                agent=action.agent,
                thinking_mode=action.thinking_mode,
                subfolder=action.subfolder,
                project=action.project,
                note=action.note,
            )
        case Prepared(slug=slug):
            data |= dict(kind="prepared", slug=slug)
        case Complete(slug=slug, archive=archive):
            data |= dict(kind="complete", slug=slug, note=f"Delivered to {archive}")
        case RunYourself():
            data |= dict(
                kind="self",
                slug=action.slug,
                command=action.step.command,
                args=action.slug,
                subfolder=action.subfolder,
                project=action.project,
                reason=_who(action.unavailable),
            )
        case Error(code=code, message=message, slug=slug, next_step=next_step):
            reason = message if next_step is None else f"{message}\nNext: {next_step.spelled(FrontEnd.CLI)}"
            data |= dict(kind="error", code=code.value, slug=slug, reason=reason)
    return data


def _tool_call(action: Dispatch) -> str:
    fields = [
        ("computer", "local"),
        ("command", action.command),
        ("args", action.slug),
        ("project", action.project),
        ("agent", action.agent),
        ("thinking_mode", action.thinking_mode),
    ]
    if action.subfolder:
        fields.append(("subfolder", action.subfolder))
    lines = ["TOOL_CALL:", "teleclaude__run_agent_command("]
    lines += [f"  {key}={_quoted(value)}," for key, value in fields]
    lines.append(")")
    if action.note:
        lines += ["", f"NOTE: {printable(action.note, keep_newlines=True)}"]
    return "\n".join(lines)


def _quoted(value: str) -> str:
    return '"' + printable(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _run_yourself(action: RunYourself, front_end: FrontEnd) -> str:
    where = printable(action.subfolder or f"the main checkout ({action.project})")
    command = f"/{action.step.command} {action.slug}".rstrip()
    return (
        f"SELF:\nNo agent is available for {action.step.task}: {printable(_who(action.unavailable))}.\n"
        f"Run {command} yourself in {where}, then call {action.again.spelled(front_end)} again."
    )


def _agent_table(report: AgentReport) -> str:
    by_agent = {u.agent: u for u in report.unavailable}
    lines = [f"{'AGENT':<10} {'STATUS':<12} {'UNTIL':<21} {'LEFT':>6}  REASON"]
    for agent in report.agents:
        u = by_agent.get(agent)
        if u is None:
            lines.append(f"{printable(agent):<10} {'available':<12}")
            continue
        left = format_duration((u.until - report.now).total_seconds(), "m")
        until = format_utc(u.until)
        lines.append(
            f"{printable(agent):<10} {'unavailable':<12} {until:<21} {left:>6}  {printable(u.reason)}"
        )
    lines += _usage_table(report)
    return "\n".join(line.rstrip() for line in lines)


def _usage_table(report: AgentReport) -> list[str]:
    by_agent = usage_by_agent(report)
    if not by_agent:
        return []
    lines = ["", f"{'USAGE':<10} (as each CLI last reported it; ↺ the window resets, local time)"]
    for agent, windows in by_agent.items():
        text = usage_text(windows, report.now, report.zone)
        over = report.headroom is not None and any(w.used_percent >= report.headroom for w in windows)
        over_text = f"  over the headroom ({report.headroom:g}%): agents under it go first" if over else ""
        lines.append(f"{printable(agent):<10} {text}{over_text}")
    return lines


def usage_by_agent(report: AgentReport) -> dict[str, tuple[UsageWindow, ...]]:
    """The report's windows that have not reset, by agent: the report's agents first, in its order."""
    current = [w for w in report.usage if w.current(report.now)]
    order = {agent: i for i, agent in enumerate(report.agents)}
    by_agent: dict[str, list[UsageWindow]] = {}
    for window in sorted(current, key=lambda w: (order.get(w.agent, len(order)), w.agent)):
        by_agent.setdefault(window.agent, []).append(window)
    return {agent: tuple(windows) for agent, windows in by_agent.items()}


def _who(unavailable: tuple[Unavailability, ...]) -> str:
    if not unavailable:
        return "no agent is configured for it"
    return ", ".join(
        f"{u.agent} until {format_utc(u.until)}" + (f" ({u.reason})" if u.reason else "") for u in unavailable
    )
