"""Setting a machine and a repository up: `install` (agent CLIs), `scaffold` (todos/), `githooks`, and the
agent stop hook (`stophook`)."""
