"""Setting a machine and a repository up: `install` (agent CLIs), `scaffold` (todos/), `githooks`, `trust`."""
