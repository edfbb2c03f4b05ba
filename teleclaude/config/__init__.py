"""Settings shared by the planner and the runtime, pure: the agent matrix (`matrix.py`), how each agent CLI
is started (`profiles.py`) and the reader of `teleclaude.toml` texts (`parse.py`). Finding and reading the
files is `teleclaude.adapters.settings`.
"""
