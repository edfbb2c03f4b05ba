"""Bubblewrap on another computer: does it work there (`probe`, once per computer and process, over ssh), the
paths a worker's sandbox there is made of (`host` and `tree`, for runtime/core/sandbox.py `remote_layout`),
and the relay that carries its hooks' marks out of it (`relayed`).

A sandboxed worker there cannot reach the workers' tmux server (its socket is hidden), so its hooks cannot
mark its pane themselves: they leave each sealed mark as a file in the session's channel folder there, as a
sandboxed worker's here do, and poke the folder's `wake` pipe. The worker's command runs under `RELAY`, a
fixed shell script outside the sandbox (in the pane, with its $TMUX), which at each poke moves the marks it
knows onto the pane (`tmux set-option -p`, only those options), where the observer reads them over ssh as
before. Nothing it reads is run: a mark is only ever a value of one of those options, and the observer keeps
only marks sealed with the session's key.

Every remote command is a fixed script with its arguments (`sh -c SCRIPT NAME ARG…`, shlex-joined by
adapters/ssh.py), never a string built from what it reads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from teleclaude.adapters import fs, ssh
from teleclaude.adapters.sandbox import WAKE  # the channel's pipe a hook pokes after leaving a mark
from teleclaude.config.profiles import Computer
from teleclaude.runtime.core.marks import MOVED_CHANNEL, exit_channel
from teleclaude.runtime.core.sandbox import RemoteHost, RemoteTree

# the marks a sandboxed worker's hooks may move onto its pane (adapters/tmux.py's options), the turn's end
# last: its usage and spend are on the pane before the observer ends the turn
RELAYED = ("teleclaude_usage", "teleclaude_spend", "teleclaude_cost", "teleclaude_stop_failure")
MARK_KEPT = 16 * 1024  # bytes of a mark file moved onto the pane

# $1 the channel folder, then the sandboxed command: the channel and its pipe are made, a background loop
# moves the marks at each poke (the pipe held open read-write, so a poke never blocks or fails) and, after a
# turn's end or a stop failure, wakes whoever waits on the session (its exit channel and the server's
# MOVED_CHANNEL: the observer looks at once, not at its next look), the command runs; once it ends the marks
# left are moved, and the channel goes
RELAY = (
    'channel=$1; shift; umask 077; mkdir -p -- "${channel%/*}" && mkdir -- "$channel" && '
    'mkfifo -- "$channel/' + WAKE + '" || exit 125; '
    "move() { moved=; for name in " + " ".join((*RELAYED, "teleclaude_turn_end")) + "; do "
    'file="$channel/$name"; [ -e "$file" ] || [ -L "$file" ] || continue; '
    'mv -f -- "$file" "$file.moved" 2>/dev/null || continue; '
    'if [ -f "$file.moved" ] && [ ! -L "$file.moved" ]; then '
    "value=$(head -c " + str(MARK_KEPT) + ' -- "$file.moved"); '
    'tmux set-option -p -t "$TMUX_PANE" "@$name" "$value" 2>/dev/null && '
    "case $name in teleclaude_turn_end|teleclaude_stop_failure) moved=1;; esac; fi; "
    'rm -f -- "$file.moved"; done; '
    '[ -z "$moved" ] || tmux wait-for -S "' + exit_channel("$TELECLAUDE_SESSION_ID") + '" \\; '
    "wait-for -S " + MOVED_CHANNEL + " 2>/dev/null; }; "
    '( exec 3<>"$channel/' + WAKE + '"; while read -r _ <&3; do move; done ) & relay=$!; '
    'trap \'kill "$relay" 2>/dev/null; rm -rf -- "$channel"; exit 129\' HUP; '
    'trap \'kill "$relay" 2>/dev/null; rm -rf -- "$channel"; exit 143\' TERM; '
    '"$@"; status=$?; move; kill "$relay" 2>/dev/null; rm -rf -- "$channel"; exit "$status"'
)

# the computer's facts, one per line, `KEY<TAB>VALUE`; $1.. the CLIs' state folders (made under HOME), then
# `--`, then the CLIs' binaries as the computer's config names them
_FACTS = r"""
say() { case "$2" in *"
"*) ;; *) printf '%s\t%s\n' "$1" "$2";; esac; }
walk() {  # the links met following $1 as the kernel does, hop by hop: each `link` its place (its folder
  # resolved) and `to` where it leads, resolved (runtime/core/sandbox.py makes one again where it is hidden)
  w_at=; w_rest=${1#/}; w_hops=0
  while [ -n "$w_rest" ] && [ "$w_hops" -le 40 ]; do
    w_part=${w_rest%%/*}
    case "$w_rest" in */*) w_rest=${w_rest#*/};; *) w_rest=;; esac
    case "$w_part" in ""|.) continue;; ..) w_at=${w_at%/*}; continue;; esac
    if [ -L "$w_at/$w_part" ]; then
      w_to=$(readlink -- "$w_at/$w_part") && w_real=$(readlink -f -- "$w_at/$w_part") || return 0
      case "$w_at/$w_part$w_real" in *"
"*) return 0;; esac
      printf 'link\t%s\nto\t%s\n' "$w_at/$w_part" "$w_real"
      w_hops=$((w_hops + 1))
      case "$w_to" in /*) w_at=;; esac
      w_rest=${w_to#/}${w_rest:+/$w_rest}
    elif [ -e "$w_at/$w_part" ]; then w_at=$w_at/$w_part
    else return 0; fi
  done
}
dir() { [ -d "$2" ] && say "$1" "$(cd -- "$2" && pwd -P)" && walk "$2"; }
interpreter() {  # the install of the interpreter a script's first line names (through env), resolved (the
  # Python a venv links to), and the venv it is named in
  [ -f "$1" ] || return 0  # a regular file only: a FIFO would hold the probe until its timeout
  i_line=$(head -n 1 -- "$1" 2>/dev/null) || return 0
  case "$i_line" in "#!"*) ;; *) return 0;; esac
  set -f; set -- ${i_line#??}; set +f
  if [ "${1##*/}" = env ]; then shift; [ "$1" = -S ] && shift; fi
  [ -n "$1" ] || return 0
  i_found=$(command -v -- "$1") && i_real=$(readlink -f -- "$i_found") || return 0
  walk "$i_found"; dir install "${i_real%/*/*}"
  [ -f "${i_found%/*/*}/pyvenv.cfg" ] && dir install "${i_found%/*/*}" && added "${i_found%/*/*}"
}
added() {  # the folders a venv's .pth files put on sys.path (an editable install's checkout)
  for a_pth in "$1"/lib/python*/site-packages/*.pth; do
    [ -f "$a_pth" ] || continue
    while IFS= read -r a_line; do case "$a_line" in /*) dir install "$a_line";; esac; done < "$a_pth"
  done
}
package() {  # the folder teleclaude's package is in, as the interpreter its script names finds it (an
  # editable install's checkout is not in its venv)
  [ -f "$1" ] || return 0
  p_line=$(head -n 1 -- "$1" 2>/dev/null) || return 0
  case "$p_line" in "#!"*) ;; *) return 0;; esac
  set -f; set -- ${p_line#??}; set +f
  if [ "${1##*/}" = env ]; then shift; [ "$1" = -S ] && shift; fi
  [ -n "$1" ] || return 0
  p_root=$("$1" -c 'import teleclaude as t, pathlib as p; print(p.Path(t.__file__).resolve().parents[1])' \
    2>/dev/null) && dir install "$p_root"
}
say home "$HOME"; walk "$HOME"
for state do
  shift; [ "$state" = -- ] && break; mkdir -p -m 700 -- "$HOME/$state"; walk "$HOME/$state"
done
dir user_home "$(getent passwd "$(id -u)" | cut -d: -f6)"
dir hidden "/run/user/$(id -u)"
dir hidden "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)"
for binary do
  found=$(command -v -- "$binary") || continue
  real=$(readlink -f -- "$found") || continue
  walk "$found"; dir install "${found%/*}"; dir install "${real%/*}"; interpreter "$real"
  folder=${real%/*}
  while [ -n "$folder" ] && [ "$folder" != / ]; do
    if [ -f "$folder/package.json" ]; then dir install "$folder"; break; fi
    [ "${folder##*/}" = node_modules ] && break
    folder=${folder%/*}
  done
done
IFS=:; for folder in $PATH; do case "$folder" in /*) dir install "$folder"
  [ "${folder##*/}" = shims ] && dir install "${folder%/*}";; esac; done; unset IFS
if found=$(command -v teleclaude); then
  real=$(readlink -f -- "$found"); walk "$found"; dir install "${real%/*/*}"; interpreter "$real"
  package "$real"
fi
settings="${XDG_CONFIG_HOME:-$HOME/.config}/teleclaude/teleclaude.toml"
[ -f "$settings" ] && say settings "$settings" && walk "$settings"
bwrap=$(command -v bwrap || PATH=/usr/bin:/bin command -v bwrap) ||
  { say problem "bwrap is not installed"; exit 0; }
say bwrap "$bwrap"
why=$("$bwrap" --ro-bind / / --unshare-pid --proc /proc --cap-drop ALL true 2>&1) ||
  say problem "$bwrap cannot make a sandbox there: $(printf '%s\n' "$why" | tail -n 1)"
"""

# $1 the clone, $2 the slug, $3 the lock's name: the worktree's git data, main's ref made loose first (a
# packed one could be written anew as a loose file in the writable refs/heads)
_TREE = r"""
set -e
say() { case "$2" in *"
"*) ;; *) printf '%s\t%s\n' "$1" "$2";; esac; }
cd -- "$1"; root=$(pwd -P); tree="$root/trees/$2"
admin=$(cd -- "$tree" && cd -- "$(git rev-parse --git-dir)" && pwd -P)
common=$(cd -- "$tree" && cd -- "$(git rev-parse --git-common-dir)" && pwd -P)
main=$(git symbolic-ref -q HEAD || true)
case "$main" in refs/heads/*)
  [ -f "$common/$main" ] || git update-ref "$main" "$(git rev-parse "$main")";; esac
own=$(git -C "$tree" symbolic-ref -q HEAD || true)
touch -- "$common/$3"
say workdir "$tree"; say root "$root"; say admin "$admin"; say common "$common"; say lock "$common/$3"
[ -d "$common/logs/refs/heads" ] && say logs "$common/logs/refs/heads"
for folder in refs/heads logs/refs/heads; do
  [ -d "$common/$folder" ] || continue
  find "$common/$folder" -type f | while IFS= read -r ref; do
    [ "${ref#"$common/$folder/"}" = "${own#refs/heads/}" ] || say other "$ref"
  done
done
"""


@dataclass(frozen=True)
class RemoteProbe:
    """Bubblewrap on one computer: its path there and what the sandbox is made of there."""

    computer: str
    bwrap: str  # "" when not found
    problem: str  # "" when it works there, else why not
    host: RemoteHost

    @property
    def usable(self) -> bool:
        return bool(self.bwrap) and not self.problem


_PROBES: dict[tuple[object, ...], RemoteProbe] = {}
_PROBES_LOCK = threading.Lock()


def probe(computer: Computer, state: tuple[str, ...], timeout: float) -> RemoteProbe:
    """Whether bubblewrap makes a sandbox on `computer` as it would a worker's, with its paths there; asked
    over ssh once per computer (and set of CLI state folders, which it makes under HOME there) in this
    process. Raises ssh.RemoteError when the computer cannot be asked."""
    agents = tuple(sorted(computer.agents.items()))
    key = (computer.name, computer.host, computer.port, computer.user, computer.path, agents, state)
    with _PROBES_LOCK:
        found = _PROBES.get(key)
    if found is not None:
        return found
    binaries = tuple(dict.fromkeys(computer.agents.values()))
    facts = _ask(computer, _FACTS, "teleclaude-sandbox-probe", (*state, "--", *binaries), timeout)
    host = RemoteHost(
        home=_one(facts, "home"),
        user_home=_one(facts, "user_home"),
        hidden=tuple(dict.fromkeys(facts.get("hidden", ()))),
        installs=tuple(dict.fromkeys(facts.get("install", ()))),
        settings=_one(facts, "settings"),
        links=tuple(dict(zip(facts.get("link", ()), facts.get("to", ()), strict=False)).items()),
    )
    problem = _one(facts, "problem")
    if not host.home.startswith("/"):
        problem = problem or "its ssh login has no HOME"
    found = RemoteProbe(computer.name, _one(facts, "bwrap"), problem, host)
    with _PROBES_LOCK:
        _PROBES[key] = found
    return found


def tree(computer: Computer, slug: str, timeout: float) -> RemoteTree:
    """The item's worktree `trees/{slug}` in the computer's clone and the git data its commits need."""
    facts = _ask(computer, _TREE, "teleclaude-sandbox-tree", (computer.project, slug, fs.LOCK_NAME), timeout)
    return RemoteTree(
        workdir=_one(facts, "workdir"),
        root=_one(facts, "root"),
        admin=_one(facts, "admin"),
        common=_one(facts, "common"),
        lock=_one(facts, "lock"),
        others=tuple(facts.get("other", ())),
        logs=_one(facts, "logs"),
    )


def channel_folder(host: RemoteHost, session_id: str) -> str:
    """The session's channel folder there (made by `RELAY` as the worker starts, removed as it ends)."""
    return f"{host.home}/.teleclaude/channels/{session_id}"


def relayed(channel: str, argv: list[str]) -> list[str]:
    """`argv` (the sandboxed command) run under `RELAY`, which moves its hooks' marks onto its pane."""
    return ["sh", "-c", RELAY, "teleclaude-relay", channel, *argv]


def _ask(
    computer: Computer, script: str, name: str, args: tuple[str, ...], timeout: float
) -> dict[str, list[str]]:
    path = ["env", f"PATH={computer.path}"] if computer.path else []
    done = ssh.run(computer, [*path, "sh", "-c", script, name, *args], timeout)
    facts: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, tab, value = line.partition("\t")
        if tab:
            facts.setdefault(key, []).append(value)
    return facts


def _one(facts: dict[str, list[str]], key: str) -> str:
    values = facts.get(key)
    return values[0] if values else ""
