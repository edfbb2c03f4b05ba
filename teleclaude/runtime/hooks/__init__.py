"""The agent CLIs' hooks (`teleclaude hook stop|stop-failure|tool-use|prompt`): each reads its CLI's JSON on
stdin and tells the runtime of its worker's session (a turn end, the error that ended it, a tool use, the
file where its CLI records the turn). They run on every stop and tool call, so they import little: the
runtime only inside a worker's session."""
