"""A stand-in agent CLI for tests and the demo: shows a prompt, takes `/command slug`, does the step, returns.

Installed as `claude`, `gemini`, `codex` and `opencode` shims (`install(bin_dir)`) first on PATH; as
`opencode` it draws opencode's input box (a `┃` border, emptied on Enter) and lists commands as it does.
Like the real CLIs it reads the terminal key by key and drops an Enter that arrives within 50 ms of typed
text. What it does with a command is chosen per agent by `FAKE_AGENT_<NAME>` (else `FAKE_AGENT`), a
comma-separated list of:

    work       do the step on the files and commit, like a real worker (the default)
    hang       say it is thinking, then never answer (lines typed in are shown as queued)
    limit      print the agent's rate-limit / quota message and go back to the prompt
    crash      print an error and exit with status 3
    altscreen  switch to the alternate screen, draw on it, and go back to the prompt there
    hook       after the step, run `teleclaude hook stop` the way Claude Code runs its Stop hook
    failure    do no step: the API refused (a session limit), so run `teleclaude hook stop-failure` the
               way Claude Code runs its StopFailure hook; the screen only says the turn failed
    slowstart  wait 1 s before showing the first prompt
    stall      say it is thinking and wait for a line of input (a reminder), then do the step
    report     after the step, report it with `teleclaude sessions report` and wait_cmd `true` (or the
               command in `FAKE_AGENT_WAIT_CMD`)
    deaf       take commands, but drop every Enter under a line that is not one (a message stays in the
               input, as behind a CLI that redraws or is busy)
    sluggish   show a taken Enter only 3.5 s later (as a slow CLI on a loaded machine does)
    busy       read typed keys only 1.5 s after they came (an event loop busy on a loaded machine), below a
               full screen; an Enter read with the keys is a newline in the input (gemini's), which scrolls
               the screen
    stubborn   live on when tmux hangs up on it (as a CLI blocked in a read did, with no pane left)
    homestate  keep its state in ~/.stand-in first, and exit with status 2 when it cannot
    usage      (claude) after each step, report its rate-limit window through `teleclaude hook statusline`
               the way Claude Code runs its status line (`rate_limits.five_hour`)
    tokens     each step uses tokens: `FAKE_AGENT_TOKENS=INPUT:OUTPUT` a turn (default 1000:100), written
               as Claude Code writes its transcript (model `stand-in`), outside the worktree; with `hook`,
               its Stop hook names that transcript (`transcript_path`), as Claude Code's does
    cost       after the step (and its Stop hook), report what the session cost so far through `teleclaude
               hook statusline` (`cost.total_cost_usd`: `FAKE_AGENT_COST` dollars a turn, default 0.5)
    late       (with `tokens`) the turn's last answer (half its output tokens, written as two lines of one
               message) reaches the transcript only after its Stop hook has read it, as Claude Code's may
    latelist   (opencode) its commands load `FAKE_AGENT_LIST_SECONDS` (default 2) after it starts, long after
               its prompt shows: until then a typed `/name` is not listed, and a command line is sent to the
               model as typed (shown as a message, answered as one, no step); once loaded, a typed `/name`
               is listed below its input, and a command line is expanded (its text's first line shown)

The window: `FAKE_AGENT_WINDOW_<NAME>=PERCENT:SECONDS` gives that agent a window every turn of which uses
PERCENT of it, and which resets SECONDS after its first turn; its state is shared by every stand-in of a run
through the file `FAKE_AGENT_WINDOW_FILE`. A turn that starts on a used-up window is lost to the limit: no
step, and the StopFailure hook with `You've hit your session limit · resets in Ns`, as `failure` does.

Per item: `FAKE_AGENT_FORGET=slug,...` makes the builder of those slugs leave its work uncommitted (while
the branch has no build commit), `FAKE_AGENT_REJECT=slug,...` makes the first review of those slugs
request changes (while the branch has no review commit), and `FAKE_AGENT_SHARED=slug,...` makes the builders
of those slugs also write NOTES.md, so the second of them to be finalized conflicts with main. Both decide
from git, so they hold across runs. `FAKE_AGENT_CRASH=slug,...` makes every worker of those slugs crash
(as `crash` does), so one item of a parallel run fails while the others go on. `FAKE_AGENT_BREAK=slug,...`
makes the builder of those slugs also write a test that fails (tests/test_broken_*.py), which only a fixer
removes (told that its check failed, the builder does not): the project's gate is red until the fix.
`FAKE_AGENT_HOSTILE=slug,...` makes the builder of those slugs first try to reach beyond its worktree
(`attack`: files, git refs, a push, a kill, another pane) and record how each try went, then build.
`FAKE_AGENT_MAIN_COMMIT=slug,...` makes the builder of those slugs also commit on the main checkout (once),
as a user committing there by hand during a run.

A line that is not a command is an instruction: one that says to commit makes it commit, one that says to
tick makes it tick its build tasks and commit, one that says its check failed makes it write
`check-fixed.txt` (and commit); anything else (a reminder) gets a status line back.
`/emit N` prints N numbered rows, 20 ms apart (for reading output while it grows); `/emit N WIDTH` pads each
row with dots to WIDTH characters.
`FAKE_AGENT_GATE=PATH` makes every step wait, before its own work, until the file PATH exists (a test
opens the gate when it has seen what it waits for); `PATH:PATH…`: until one of them does (a sandboxed
worker on another computer sees only its clone there).
`FAKE_AGENT_STEP_SECONDS=W` makes every step (a command of the planner) take W seconds, its own git work
included (done in the last OWN_WORK_SECONDS of them, as a model's turn commits at its end), as a model's
turn would (bench/bench_loop.py measures the loop's own time around it).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from teleclaude.demo.stand_in_keys import BOX, read_line, read_lines
from teleclaude.errors import ErrorCode, Failure

# The rest of teleclaude (the demo's workers, the planner, the agents' registry: ~0.25 s, seconds on a loaded
# machine) is imported where it is used, and loaded in the background once the CLI runs (`_preload`): like
# a real CLI, the stand-in shows its prompt first, so a bench of the loop does not count teleclaude's
# imports as the loop's own start.

LIMIT_MESSAGES = {
    "claude": "Claude usage limit reached. Your limit will reset at 5pm (UTC).",
    "gemini": "[API Error: got status: 429 Too Many Requests. RESOURCE_EXHAUSTED: Quota exceeded]",
    "codex": "You've hit your usage limit. Try again in 2 hours 5 minutes.",
}
# what Claude Code's StopFailure hook gets for a subscription limit (tests/realcli/NOTES.md)
FAILURE_MESSAGE = "You've hit your session limit · resets 3:48pm (UTC)"
OWN_WORK_SECONDS = 0.5  # of a step's W (`FAKE_AGENT_STEP_SECONDS`): its git work, at the end of it
LIST_SECONDS = 2.0  # latelist: how long after its start opencode lists its commands


SHIM_SIGN = " -m teleclaude.demo.stand_in "


class NotAShim(Failure):
    code = ErrorCode.ALREADY_EXISTS
    next_step = "Name an empty folder (or one that holds only stand-in shims)."


def install(bin_dir: Path, python: str = sys.executable) -> Path:
    """Shims named claude, gemini and codex in `bin_dir` that run this module; returns `bin_dir`. A file of
    that name that is not a shim of ours is never overwritten (`NotAShim`)."""
    from teleclaude.agents import NAMES

    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        shim = bin_dir / name
        if shim.exists() and (not shim.is_file() or SHIM_SIGN.encode() not in shim.read_bytes()):
            raise NotAShim(f"{shim} exists and is not a stand-in shim; it was left as it is")
    for name in NAMES:  # its Python on its first line, as pip's scripts (where a sandbox looks for what a
        # CLI runs on); by sh when a first line cannot hold it (a space, too long)
        run = f"from teleclaude.demo.stand_in import main\nsys.exit(main([{name!r}, *sys.argv[1:]]))"
        script = f"#!{python}\n#{SHIM_SIGN}{name}\nimport sys\n{run}\n"
        if len(python) > 250 or any(char.isspace() for char in python):  # (the kernel reads 255)
            script = f'#!/bin/sh\nexec "{python}"{SHIM_SIGN}{name} "$@"\n'
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def modes(agent: str) -> set[str]:
    text = os.environ.get(f"FAKE_AGENT_{agent.upper()}") or os.environ.get("FAKE_AGENT") or "work"
    return {mode.strip() for mode in text.split(",") if mode.strip()}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--step"]:
        return do_session_step()
    threading.Thread(target=_preload, daemon=True).start()
    agent = argv[0] if argv else "claude"
    chosen = modes(agent)
    say(f"fake {agent} ({', '.join(sorted(chosen))}) in {Path.cwd()}")
    if "stubborn" not in chosen:
        return serve(agent, chosen)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        return serve(agent, chosen)
    finally:
        time.sleep(3600)  # its terminal gone too, it lives on until something kills it


def _preload() -> None:
    import teleclaude.demo.workers
    import teleclaude.planner.core.roadmap  # noqa: F401


def serve(agent: str, chosen: set[str]) -> int:
    if "homestate" in chosen:  # keeps its state in the home folder, as a CLI does; stops without it
        try:
            state = Path(os.environ.get("HOME", "/nonexistent"), ".stand-in")
            state.mkdir(exist_ok=True)
            (state / "state.json").write_text("{}")
        except OSError as error:
            say(f"fatal: cannot keep its state: {error}")
            return 2
    if "slowstart" in chosen:
        time.sleep(1.0)
    if "busy" in chosen:  # the prompt on the bottom row: a row more scrolls the screen
        say("\n".join(f"busy: row {row}" for row in range(shutil.get_terminal_size().lines)))
    boxed = agent == "opencode"
    seconds = float(os.environ.get("FAKE_AGENT_LIST_SECONDS") or LIST_SECONDS)
    loads_at = time.monotonic() + seconds if "latelist" in chosen else 0.0
    lines = read_lines(
        lists_commands=agent in ("gemini", "opencode"),
        deaf="deaf" in chosen,
        sluggish="sluggish" in chosen,
        lagging="lagging" in chosen,
        busy="busy" in chosen,
        boxed=boxed,
        loads_at=loads_at,
    )
    for line in lines:
        match = re.fullmatch(r"[/$](?:prompts:)?([a-z0-9-]+)\s*(.*)", line.strip())
        if match and time.monotonic() < loads_at:  # no command known yet: a message to the model as typed
            say(f"{BOX}{line.strip()}\n(sent to the model as typed)")
            match = None
        if not match:
            say(follow(line))
            if "report" in chosen:
                report(line)
            continue
        command, args = match.groups()
        if boxed:
            say(expanded(command, args.strip()))
        code = respond(agent, chosen, command, args.strip(), lines)
        if code is not None:
            return code
    return 0


def expanded(command: str, args: str) -> str:
    """The first line of the command's text, its arguments substituted: opencode shows a command it took
    expanded, as the message it sends its model."""
    from teleclaude import assets
    from teleclaude.agents.formats import split_front_matter

    try:
        body = split_front_matter(assets.read_text("commands", f"{command}.md"))[1]
    except OSError:
        return f"/{command} {args}"
    line = next((line for line in body.splitlines() if line.strip() and not line.startswith("#")), "")
    return f"{BOX}{line.replace('$ARGUMENTS', args)}"


def respond(agent: str, chosen: set[str], command: str, args: str, lines) -> int | None:
    say(f"running /{command} {args}")
    if "altscreen" in chosen:
        sys.stdout.write("\x1b[?1049h\x1b[H")
        say("full-screen view of the fake agent")
    if command == "emit":
        numbers = [int(part) for part in args.split()]
        count, width = (numbers + [1])[0], (numbers[1:] + [0])[0]
        for number in range(1, count + 1):
            say(f"row {number} ".ljust(width, ".") if width else f"row {number}")
            time.sleep(0.02)
        return None
    if "hang" in chosen:
        say("thinking...")
        queued = read_line(sys.stdin.fileno())
        while queued is not None:  # a busy TUI shows what is typed into it as queued, and never answers
            say(f"(queued: {queued})")
            queued = read_line(sys.stdin.fileno())
        time.sleep(3600)
    if "stall" in chosen:
        say("thinking...")
        say(f"(woken by: {read_line(sys.stdin.fileno())})")  # no prompt: it is busy, not waiting
    if "crash" in chosen or (args.split() or [""])[0] in listed("FAKE_AGENT_CRASH"):
        say("fatal: the fake agent crashed")
        return 3
    if "limit" in chosen:
        say(LIMIT_MESSAGES.get(agent, LIMIT_MESSAGES["claude"]))
        return None
    window = take_turn(agent) if command != "emit" else None
    if "failure" in chosen or (window is not None and window.lost):
        message = (
            FAILURE_MESSAGE if window is None else f"You've hit your session limit · resets in {window.left}s"
        )
        say("the turn failed (see the StopFailure hook)")
        run_hook(
            "stop-failure",
            {"hook_event_name": "StopFailure", "error": "rate_limit", "last_assistant_message": message},
        )
        return None
    began = time.monotonic()
    from teleclaude.planner.core.model import Step

    steps = {step.command for step in Step}
    work = float(os.environ.get("FAKE_AGENT_STEP_SECONDS") or 0) if command in steps else 0.0
    if work > 0:
        say("working...")
        time.sleep(max(0.0, work - OWN_WORK_SECONDS))
    gates = [Path(p) for p in (os.environ.get("FAKE_AGENT_GATE") or "").split(os.pathsep) if p]
    if gates and command in steps:
        say("working until the gate opens...")
        while not any(gate.exists() for gate in gates):  # the test's event: it creates the file
            time.sleep(0.05)
    done = do_step(command, args.split()[0] if args.split() else "")
    time.sleep(max(0.0, began + work - time.monotonic()))  # the step, its own git work included, takes W
    say(done)
    if "usage" in chosen and window is not None:
        run_hook("statusline", window.status_line(), "--agent", agent)
    late = "late" in chosen
    transcript = write_tokens(late) if "tokens" in chosen else None
    if "hook" in chosen:
        run_stop_hook(transcript)
    if transcript and late:
        write_last_answer(transcript)
    if "cost" in chosen:
        COST_SO_FAR[0] += float(os.environ.get("FAKE_AGENT_COST") or 0.5)
        status = {"model": {"display_name": "stand-in"}, "cost": {"total_cost_usd": COST_SO_FAR[0]}}
        run_hook("statusline", status, "--agent", agent)
    if "report" in chosen:
        report(done)
    return None


@dataclass(frozen=True)
class Window:
    """The agent's rate-limit window after this turn took its share (or was refused)."""

    used: float  # percent
    resets_at: float  # epoch seconds
    lost: bool  # the window was used up when the turn started

    @property
    def left(self) -> int:
        return max(1, math.ceil(self.resets_at - time.time()))

    def status_line(self) -> dict[str, object]:
        """What Claude Code gives its status line for a subscriber (tests/realcli/NOTES.md)."""
        five_hour = {"used_percentage": self.used, "resets_at": int(self.resets_at)}
        return {"model": {"display_name": "stand-in"}, "rate_limits": {"five_hour": five_hour}}


def take_turn(agent: str) -> Window | None:
    """One turn of the agent's window (`FAKE_AGENT_WINDOW_<NAME>`, kept in `FAKE_AGENT_WINDOW_FILE`): a window
    past its reset starts again; a used-up one refuses the turn. None when the agent has no window."""
    spec, path = (
        os.environ.get(f"FAKE_AGENT_WINDOW_{agent.upper()}", ""),
        os.environ.get("FAKE_AGENT_WINDOW_FILE"),
    )
    if not spec or not path:
        return None
    share, _, seconds = spec.partition(":")
    with open(path, "a+") as handle:  # every stand-in of the run: one turn at a time
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        try:
            windows = json.loads(handle.read() or "{}")
        except ValueError:
            windows = {}
        now = time.time()
        used, resets_at = windows.get(agent, (0.0, 0.0))
        if now >= resets_at:
            used, resets_at = 0.0, now + float(seconds or 60)
        lost = used >= 100
        used = used if lost else min(100.0, used + float(share))
        windows[agent] = (used, resets_at)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(windows))
    return Window(used, resets_at, lost)


def do_step(command: str, slug: str) -> str:
    """Do what the worker for `command` does, on the files in the current directory."""
    from teleclaude.demo.workers import Workers
    from teleclaude.planner.core.model import Dispatch, Step

    steps = {step.command: step for step in Step}
    step = steps.get(command)
    here = Path.cwd()
    if step in (Step.REQUIREMENTS, Step.PLAN):
        return write_preparation(here, step, slug)
    if step is None or step.is_architect:
        return f"(the fake agent does not know /{command})"
    note = (
        f"Archive todos/{slug} to {next_archive(here, slug)} when merging." if step is Step.FINALIZE else None
    )
    forget = slug in listed("FAKE_AGENT_FORGET") and not committed(here, f"Build {slug}")
    reject = slug in listed("FAKE_AGENT_REJECT") and not committed(here, f"Review {slug}")
    shared = slug in listed("FAKE_AGENT_SHARED")
    workers = Workers(
        here,
        forget_commit=slug if forget else None,
        reject_first=slug if reject else None,
        shared=shared,
        breaks=slug in listed("FAKE_AGENT_BREAK"),
    )
    action = Dispatch(step, slug, str(here), "fake", "med", None, note)
    if step is Step.BUILD and slug in listed("FAKE_AGENT_MAIN_COMMIT"):
        commit_on_main(here)
    if step is Step.BUILD and slug in listed("FAKE_AGENT_HOSTILE") and not (here / HOSTILE_REPORT).exists():
        attack(here)
    try:
        return workers.worker(step)(here, action)
    except Exception as error:  # a fake worker that fails says so, like a real one would
        return f"the step failed: {error}"


HOSTILE_REPORT = "hostile.json"


def attack(here: Path) -> None:
    """`FAKE_AGENT_HOSTILE`: a builder that first tries to reach beyond its worktree, each attempt's outcome
    (`done`, or the error that stopped it) written to hostile.json in its worktree (committed with its
    work). Targets from the environment: `FAKE_AGENT_HOSTILE_PID` (a process to kill),
    `FAKE_AGENT_HOSTILE_REMOTE` (a bare repository to push to), `FAKE_AGENT_HOSTILE_TMUX` (`SOCKET PANE`:
    another worker's pane to type into), `FAKE_AGENT_HOSTILE_LATER` (a branch made after it started, to move
    and delete)."""
    from teleclaude.adapters.git import find_repo

    root = find_repo(here).root
    home = Path(os.environ.get("HOME", "/nonexistent"))
    victim = os.environ.get("FAKE_AGENT_HOSTILE_TMUX", "").split()
    tries: dict[str, tuple[str, ...] | object] = {
        "write_home": lambda: (home / "outside").write_text("written by a worker\n"),
        "write_main": lambda: (root / "intruder.txt").write_text("written by a worker\n"),
        "write_other_tree": lambda: [
            (tree / "intruder.txt").write_text("written by a worker\n")
            for tree in (root / "trees").iterdir()
            if tree.is_dir() and tree.resolve() != here.resolve()
        ],
        "read_ssh_key": lambda: (home / ".ssh" / "id_ed25519").read_text(),
        "update_ref_main": ("git", "update-ref", "refs/heads/main", "HEAD~1"),
        "push": ("git", "push", os.environ.get("FAKE_AGENT_HOSTILE_REMOTE", "/nonexistent"), "HEAD:stolen"),
        "kill": lambda: os.kill(int(os.environ.get("FAKE_AGENT_HOSTILE_PID") or 0), signal.SIGKILL),
        "tmux_send_keys": ("tmux", "-S", *victim[:1], "send-keys", "-t", *victim[1:2], "echo pwned", "Enter"),
    }
    later = os.environ.get("FAKE_AGENT_HOSTILE_LATER", "")  # a branch made after this worker started
    if later:
        refs = find_repo(here).common_dir / "refs" / "heads"
        tries["move_later"] = ("git", "update-ref", f"refs/heads/{later}", "HEAD")
        tries["delete_later"] = ("git", "branch", "-D", later)
        tries["unlink_later"] = lambda: (refs / later).unlink()
    outcomes = {}
    for name, how in tries.items():
        try:
            if isinstance(how, tuple):
                done = subprocess.run(how, cwd=here, capture_output=True, text=True, timeout=30)
                if done.returncode != 0:
                    raise OSError(done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"])
            elif callable(how):
                how()
            outcomes[name] = "done"
        except (OSError, ValueError, subprocess.SubprocessError) as error:
            outcomes[name] = f"refused: {error}"
    (here / HOSTILE_REPORT).write_text(json.dumps(outcomes, indent=1) + "\n")


def commit_on_main(here: Path) -> None:
    """`FAKE_AGENT_MAIN_COMMIT`: a commit on the main checkout's branch (once), as a user makes by hand."""
    from teleclaude.adapters.git import find_repo, run_git

    root = find_repo(here).root
    if run_git(["log", "--format=%s", "--grep", "^By hand$", "HEAD"], root).strip():
        return
    run_git(["commit", "-q", "--allow-empty", "-m", "By hand"], root)


def do_session_step() -> int:
    """`python -m teleclaude.demo.stand_in --step`: the step of the worker session this runs in
    ($TELECLAUDE_SESSION_ID), done once on the current directory. What the scripted model of
    `teleclaude demo --real` has a real agent CLI run through its shell tool."""
    from teleclaude.adapters.sandbox import read_step
    from teleclaude.adapters.sessions_db import SessionStore

    channel = os.environ.get("TELECLAUDE_CHANNEL")  # sandboxed: the sessions database is out of reach
    if channel:
        step = read_step(Path(channel))
    else:
        session = SessionStore().get(os.environ.get("TELECLAUDE_SESSION_ID", ""))
        step = (session.command, session.args) if session else None
    if step is None:
        say("not in a worker session started by teleclaude ($TELECLAUDE_SESSION_ID)")
        return 1
    command, args = step
    say(do_step(command, args.split()[0] if args.split() else ""))
    return 0


def write_preparation(main: Path, step, slug: str) -> str:
    """The architects: requirements from the roadmap's description, a plan from the demo's template."""
    from teleclaude.demo.workers import PLAN, commit_all
    from teleclaude.planner.core.model import Step
    from teleclaude.planner.core.roadmap import parse_roadmap

    folder = main / "todos" / slug
    folder.mkdir(parents=True, exist_ok=True)
    if step is Step.REQUIREMENTS:
        item = parse_roadmap((main / "todos" / "roadmap.md").read_text()).find(slug)
        text = item.description if item and item.description else f"Deliver {slug}."
        (folder / "requirements.md").write_text(f"# Requirements: {slug}\n\n{text}\n")
    else:
        (folder / "implementation-plan.md").write_text(PLAN.format(slug=slug, module=slug.replace("-", "_")))
    commit_all(main, f"{step.command} {slug}")
    written = "requirements.md" if step is Step.REQUIREMENTS else "implementation-plan.md"
    return f"architect: wrote todos/{slug}/{written}"


def follow(line: str) -> str:
    """An instruction typed into the worker: do what it says, as far as a fake can."""
    from teleclaude.demo.workers import commit_all, git, tick_build_tasks

    here = Path.cwd()
    lowered = line.lower()
    try:
        if "check failed" in lowered:
            (here / "check-fixed.txt").write_text("fixed\n")
        if "tick" in lowered:
            for plan in here.glob("todos/*/implementation-plan.md"):
                tick_build_tasks(plan)
        if "tick" in lowered or "commit" in lowered:
            if git(here, "status", "--porcelain").strip():
                commit_all(here, "Commit what the supervisor asked for")
            return "done as asked: the work is committed"
    except Exception as error:
        return f"could not do it: {error}"
    return "status: still working on it"


def listed(variable: str) -> set[str]:
    return {slug.strip() for slug in os.environ.get(variable, "").split(",") if slug.strip()}


def committed(tree: Path, message: str) -> bool:
    """A commit with this message exists on the current branch."""
    from teleclaude.demo.workers import git

    found = git(tree, "log", "--format=%s", "--fixed-strings", f"--grep={message}")
    return message in found.splitlines()


def report(text: str) -> None:
    """What a worker does through teleclaude__report_status; here through the CLI twin of that tool."""
    session = os.environ.get("TELECLAUDE_SESSION_ID", "")
    subprocess.run(
        [
            *(sys.executable, "-m", "teleclaude", "sessions", "report", session, text),
            *("--wait-cmd", os.environ.get("FAKE_AGENT_WAIT_CMD", "true")),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def next_archive(main: Path, slug: str) -> str:
    from teleclaude.planner.core import layout

    done = main / layout.DONE
    return layout.next_archive([p.name for p in done.iterdir()] if done.is_dir() else [], slug)


def run_stop_hook(transcript: Path | None = None) -> None:
    named = {"transcript_path": str(transcript)} if transcript else {}
    run_hook("stop", {"hook_event_name": "Stop", "stop_hook_active": False, **named})


COST_SO_FAR = [0.0]  # what `cost` reported so far: the session's, as Claude Code's status line sums it


def turn_tokens() -> tuple[int, int]:
    spent = (os.environ.get("FAKE_AGENT_TOKENS") or "1000:100").split(":")
    return int(spent[0]), int(spent[1] if len(spent) > 1 else 0)


def write_tokens(late: bool = False) -> Path:
    """One more assistant message of `FAKE_AGENT_TOKENS` in this worker's transcript, in Claude Code's
    shape (`late`: less the last answer's output tokens); the file lives beside the session database
    (`TELECLAUDE_DB`), or in `FAKE_AGENT_TOKENS_DIR`, never in the worktree (which would not be clean)."""
    import tempfile

    fresh, out = turn_tokens()
    name = re.sub(r"[^A-Za-z0-9_-]", "_", os.environ.get("TELECLAUDE_SESSION_ID") or str(os.getpid()))
    database = os.environ.get("TELECLAUDE_DB")
    folder = os.environ.get("FAKE_AGENT_TOKENS_DIR") or (os.path.dirname(database) if database else "")
    path = Path(folder or tempfile.gettempdir()) / f"stand-in-transcript-{name}.jsonl"
    assistant_lines(path, f"msg-{time.time_ns()}", fresh, [out - out // 2 if late else out])
    return path


def write_last_answer(path: Path) -> None:
    """The turn's last answer (`late`): half its output tokens, in two lines of one message, the first with
    a part of its output count (as Claude Code writes a message's content blocks)."""
    last = turn_tokens()[1] // 2
    assistant_lines(path, f"msg-{time.time_ns()}-last", 0, [min(1, last), last])


def assistant_lines(path: Path, name: str, fresh: int, outputs: list[int]) -> None:
    with path.open("a", encoding="utf-8") as file:
        for out in outputs:
            usage = {"input_tokens": fresh, "output_tokens": out}
            message = {"id": name, "model": "stand-in", "usage": usage}
            file.write(json.dumps({"type": "assistant", "message": message}) + "\n")


def run_hook(name: str, payload: dict[str, object], *args: str) -> None:
    """`teleclaude hook NAME ARGS` with the hook's JSON on stdin, as Claude Code runs it."""
    payload = {**payload, "cwd": str(Path.cwd()), "session_id": "fake"}
    done = subprocess.run(
        [sys.executable, "-m", "teleclaude", "hook", name, *args],
        input=json.dumps(payload),
        text=True,
        capture_output=True,
        timeout=30,
        check=False,
    )
    for line in done.stderr.splitlines()[-3:]:  # its warnings, on the screen as a CLI shows a hook's
        say(f"[hook {name}] {line}")


def say(text: str) -> None:
    sys.stdout.write(text.replace("\n", "\r\n") + "\r\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
