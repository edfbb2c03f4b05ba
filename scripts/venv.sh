# Sourced by the other scripts: makes .venv with teleclaude and its test tools, once and after pyproject changes.
set -euo pipefail
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "teleclaude needs Python 3.11 or newer (found: $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
stamp=.venv/.teleclaude-installed
if [ ! -f "$stamp" ]; then
  echo "first run: building .venv (teleclaude and its test tools; a minute or two, once)..." >&2
elif [ pyproject.toml -nt "$stamp" ]; then
  echo "pyproject.toml changed: updating .venv..." >&2
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
  touch "$stamp"
  echo ".venv is ready; to have teleclaude on PATH in this shell: . .venv/bin/activate" >&2
fi
