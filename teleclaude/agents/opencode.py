"""opencode (`opencode-ai`, pinned in tests/realcli/versions.txt): its TUI in tmux, and a plugin instead of
hooks. Measured on 1.18.33 (../shared/notes/opencode.md beside the repository, tests/realcli/NOTES.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from teleclaude.agents.answers import MESSAGES, answers_used, data_file
from teleclaude.agents.formats import split_front_matter
from teleclaude.agents.profile import (
    AgentProfile,
    Blocker,
    Hooks,
    Install,
    Kind,
    Resume,
    SandboxNeeds,
    UsageReport,
)
from teleclaude.agents.tokens import DatabaseRecord, TokenReport, Tokens


def command_md(name: str, markdown: str) -> str:
    """An opencode command file: `description` in its front matter (the only key of ours it knows), and the
    body as is (it substitutes `$ARGUMENTS` itself)."""
    meta, body = split_front_matter(markdown)
    description = meta.get("description", "") or f"teleclaude role command {name}"
    return (
        f"---\ndescription: {json.dumps(description)}\n---\n"
        "<!-- Installed by `teleclaude install`; `teleclaude install --uninstall` removes it. -->\n"
        + body.lstrip("\n")
    )


# opencode runs no commands on its events: a plugin (a JS module in its `plugins/` folder, loaded at start)
# does. It gets every bus event and the `tool.execute.before` and `chat.message` hooks, and runs
# `teleclaude hook VERB` with the JSON the other CLIs' hooks send. `session.idle` ends a turn (twice ~100 ms
# apart after an error or an abort: a turn that failed ends by its `session.error`, and is not also a stop);
# a refused stop's reason is sent to the session as the next prompt, and the idle after it carries
# `stop_hook_active`.
_PLUGIN = """\
// Installed by `teleclaude install`; `teleclaude install --uninstall` removes it.
import { spawn } from "node:child_process"

const RUN = __RUN__

function run(verb, input) {
  return new Promise((resolve) => {
    const [command, ...args] = RUN[verb]
    let out = ""
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "ignore"], env: process.env })
    child.stdout.on("data", (chunk) => (out += chunk))
    child.on("error", () => resolve(""))
    child.on("close", () => resolve(out))
    child.stdin.end(JSON.stringify(input))
  })
}

function failureKind(error) {
  const data = error?.data ?? {}
  const status = data.statusCode
  const said = `${data.message ?? ""} ${data.responseBody ?? ""}`
  if (/insufficient_quota|billing/i.test(said)) return "billing_error"
  if (status === 429) return "rate_limit"
  if (status === 503 || status === 529) return "overloaded"
  if (status >= 500) return "server_error"
  if (status === 401 || status === 403) return "authentication_failed"
  return error?.name ?? "unknown"
}

export const Teleclaude = async ({ client, directory }) => {
  const failed = new Set()
  const refused = new Set()
  return {
    event: async ({ event }) => {
      const props = event.properties ?? {}
      const session = props.sessionID ?? ""
      if (event.type === "session.status" && props.status?.type === "busy") failed.delete(session)
      if (event.type === "session.error" && RUN["stop-failure"]) {
        if (props.error?.name === "MessageAbortedError") return
        failed.add(session)
        await run("stop-failure", {
          session_id: session,
          cwd: directory,
          hook_event_name: "session.error",
          error: failureKind(props.error),
          last_assistant_message: props.error?.data?.message ?? props.error?.name ?? "",
        })
      }
      if (event.type === "session.idle" && RUN.stop && !failed.has(session)) {
        const active = refused.delete(session)
        const out = await run("stop", {
          session_id: session,
          cwd: directory,
          hook_event_name: "session.idle",
          stop_hook_active: active,
        })
        let answer = null
        try {
          answer = JSON.parse(out)
        } catch {}
        if (answer?.decision === "block" && answer.reason) {
          refused.add(session)
          const parts = [{ type: "text", text: answer.reason }]
          client.session.promptAsync({ path: { id: session }, body: { parts } }).catch(() => {})
        }
      }
    },
    "chat.message": async (input) => {
      if (!RUN.prompt) return
      await run("prompt", { session_id: input.sessionID, cwd: directory, hook_event_name: "chat.message" })
    },
    "tool.execute.before": async (input, output) => {
      if (!RUN["tool-use"]) return
      await run("tool-use", {
        session_id: input.sessionID,
        cwd: directory,
        hook_event_name: "tool.execute.before",
        tool_name: input.tool,
        tool_input: output.args,
      })
    },
  }
}
"""


def plugin(commands: Mapping[str, Sequence[str]]) -> str:
    """The plugin file: `commands` maps each hook verb (stop, tool-use, stop-failure, prompt) to the argv it
    runs."""
    return _PLUGIN.replace("__RUN__", json.dumps({verb: list(argv) for verb, argv in commands.items()}))


# each permission asked for (`external_directory` and `doom_loop` ask by default) is allowed: a worker in a
# detached pane cannot answer. No auto-update (it would `npm install -g` a newer opencode), no fetch of the
# models catalogue, no LSP downloads: nothing a worker does goes to the network but its model
ENV = {
    "OPENCODE_PERMISSION": json.dumps({"*": "allow", "external_directory": "allow", "doom_loop": "allow"}),
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
}


def resume_argv(binary: str, flags: Sequence[str], conversation: str) -> list[str]:
    return [binary, *flags, "--session", conversation]


# its conversation is a session `ses_…` (its plugin's `sessionID`, which the plugin passes on as the hooks'
# `session_id`), a row of the `session` table of its database, where its messages are too (no file per
# conversation); `--session ID` opens it in the TUI. An id it does not know: "Session not found". It shows its
# empty prompt (`0 tokens` in its sidebar) before it paints the conversation (0.25 s later at rest, later
# under load): the footer of its last answer, `▣  Build · Scripted Model`, says it is painted
RESUME = Resume(
    r"ses_[0-9A-Za-z]{20,40}",
    resume_argv,
    (r"Session not found",),
    database=".local/share/opencode/opencode.db",
    replayed=r"^\s*▣\s+\S",
)

RETRYING = r"\[retrying (in \d+\w* )?attempt #\d+\]"

# it keeps each message in its database (`$XDG_DATA_HOME/opencode/opencode.db`, ~/.local/share by default),
# a row of `message` whose JSON `data` has, for an answer, `tokens: {input, output, reasoning, cache: {read,
# write}}` (input without what was read from or written to the cache, output without the reasoning) and
# `cost` (0 for a model its catalogue gives no price); a subagent's messages are in sessions whose
# `parent_id` is the worker's session (answers.py `MESSAGES` selects them, `answers_used` sums them)
DATABASE = "opencode/opencode.db"


def database_path(environ: Mapping[str, str]) -> str:
    return data_file(environ, DATABASE)


def database_tokens(rows: list[tuple[object, ...]]) -> Tokens | None:
    """The session's answers summed (each a row of MESSAGES); the cost it reports when it gave one (a cost
    of 0 is a model it has no price for: unknown, never $0)."""
    used = answers_used(rows)
    return None if used is None else Tokens(*used)


PROFILE = AgentProfile(
    "opencode",
    ("opencode",),
    (),
    # its model is its config's `model`; it has no thinking-effort flag of its own
    {"slow": (), "med": (), "fast": ()},
    # its empty input box: `┃  Ask anything… "Fix broken tests"` at start, a bare `┃` row after a turn
    prompt=r"^\s*┃\s*(Ask anything….*)?$",
    # after its retries it shows the provider's error as a transcript row: `┃  Rate limit reached (…)`;
    # while it still retries the same words are in its footer, followed by `[retrying …]`
    limit_patterns=(
        r"^\s*┃\s*Rate limit reached\b(?!.*\[retrying)",
        r"^\s*┃\s*The usage limit has been reached\b",
        r"^\s*┃\s*You exceeded your current quota\b",
        r"^\s*┃\s*Our servers are currently overloaded\b",
    ),
    # its footer while it works: `⬝⬝⬝⬝⬝⬝⬝⬝  esc interrupt` (`esc again to interrupt` after one Escape)
    busy=r"\besc (again to )?interrupt\b",
    # `Rate limit reached (scripted) [retrying in 2s attempt #2]`, or without `in 2s` under a Retry-After
    retry=RETRYING,
    # it honours a Retry-After with no cap, five times: past api_wait_limit of that row it is limited
    api_wait=RETRYING,
    env=ENV,
    # its commands load seconds after its prompt shows (a `/next-build x` typed before goes to the model as
    # typed); once loaded, its popup under a typed `/next-build` lists `┃ /next-build   Builder - do …`
    # (a space typed then empties the line): the name is erased and the line typed whole
    command_listed=r"^\s*┃\s*/{name}\s{2,}\S",
    command_retype=True,
    # and under load (both cores busy) it still sent the listed line to the model as typed now and then
    command_confirm=True,
    blockers=(
        Blocker(
            "its permission question",
            r"△ Permission required",
            "teleclaude starts opencode workers with OPENCODE_PERMISSION allowing everything (the "
            'profile\'s env); if it was overridden, set "permission": {"*": "allow"} in '
            "~/.config/opencode/opencode.json.",
        ),
        Blocker(
            "its refusal of the command",
            r"Command not found: /?\S+|Unknown command",
            "Run `teleclaude install --opencode` so that the role commands exist for opencode.",
            kind=Kind.COMMAND,
        ),
    ),
    hooks=Hooks(
        (
            ("session.idle", "stop"),
            ("session.error", "stop-failure"),
            ("tool.execute.before", "tool-use"),
            ("chat.message", "prompt"),  # a message given to a session: its id, before its model is asked
        ),
        stop_keys=(),
    ),
    # ~/.config/opencode (or $OPENCODE_CONFIG_DIR) for the user, the project's .opencode/; its MCP servers
    # are `mcp.NAME = {"type": "local", "command": [argv…]}` in opencode.json there
    install=Install(
        ".config/opencode",
        folder_env="OPENCODE_CONFIG_DIR",
        project_folder=".opencode",
        command_file="{folder}/commands/{name}.md",
        command_text=command_md,
        mcp_file=("{folder}/opencode.json", "{folder}/opencode.json"),
        mcp_key="mcp",
        mcp_entry={"type": "local", "enabled": True},
        mcp_argv=True,
        hooks_file="{folder}/plugins/teleclaude.js",
        hooks_text=plugin,
        # at each start it npm-installs `@opencode-ai/plugin` into every config folder it reads, the project's
        # .opencode/ too (64 MB of node_modules), with its package.json and lock file
        project_ignore=("node_modules/", "package.json", "package-lock.json", "bun.lock"),
        # it adds its schema's address to an opencode.json that lacks it
        mcp_own_keys={"$schema": "https://opencode.ai/config.json"},
    ),
    # 1.18.33 reads a provider's rate-limit headers only to time its retries (`retry-after`,
    # `x-ratelimit-*`), and its plugin events carry no usage: only the error that ends a session
    usage=UsageReport(
        lacking="opencode 1.18 reports no usage before a limit: its plugin sees only the error "
        "(session.error) that ends a turn"
    ),
    # its config, data (sessions, login), state and cache folders (XDG)
    sandbox=SandboxNeeds(
        (".config/opencode", ".local/share/opencode", ".local/state/opencode", ".cache/opencode")
    ),
    colour="#f59e0b",
    resume=RESUME,
    tokens=TokenReport(database=DatabaseRecord(database_path, MESSAGES, database_tokens)),
)
