# Sourced by the other scripts: makes .venv with teleclaude and its test tools, once and after pyproject changes.
set -euo pipefail
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "teleclaude needs Python 3.11 or newer (found: $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
# The editable install puts the checkout on sys.path with a plain path in a .pth file (setuptools' "compat"
# mode): its default import hook costs every Python process ~14 ms at start (pathlib, re and urllib
# imported by site), and the tests start hundreds. The stamp holds the mode: a .venv made before is redone.
mode=editable_mode=compat
stamp=.venv/.teleclaude-installed
if [ ! -f "$stamp" ]; then
  echo "first run: building .venv (teleclaude and its test tools; a minute or two, once)..." >&2
elif [ pyproject.toml -nt "$stamp" ] || [ "$(cat "$stamp")" != "$mode" ]; then
  echo "pyproject.toml or the install's mode changed: updating .venv..." >&2
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$(cat "$stamp")" != "$mode" ]; then
  pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
  # a setuptools without the mode gets its default editable install: slower to start, the same otherwise
  "${pip[@]}" -e ".[test]" --config-settings "$mode" || "${pip[@]}" -e ".[test]"
  echo "$mode" >"$stamp"
  echo ".venv is ready; to have teleclaude on PATH in this shell: . .venv/bin/activate" >&2
fi
