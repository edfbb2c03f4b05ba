"""The usage a CLI's transcript reports, kept by the hooks that are given that file (codex's
`UserPromptSubmit` and `Stop`), for every codex session of the user, a worker's or not; never a failure."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from teleclaude.adapters.store import AvailabilityStore

RESET = 4102444800  # 2100-01-01


def rollout(path: Path, used: float) -> Path:
    """A codex 0.169 rollout file ending with a token_count event, as codex wrote it (tests/realcli)."""
    limits = {
        "limit_id": "codex",
        "limit_name": None,
        "primary": {"used_percent": used, "window_minutes": 300, "resets_at": RESET},
        "secondary": {"used_percent": 22.0, "window_minutes": 10080, "resets_at": RESET + 86400},
        "credits": None,
        "plan_type": None,
        "rate_limit_reached_type": None,
    }
    events = [
        {"type": "task_started", "turn_id": "t1"},
        {"type": "token_count", "info": None, "rate_limits": limits},
    ]
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    path.write_text(
        "".join(json.dumps({"timestamp": stamp, "type": "event_msg", "payload": e}) + "\n" for e in events)
    )
    return path


def hook(cli_env, verb: str, payload: dict, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in cli_env.items() if k != "TELECLAUDE_SESSION_ID"}
    argv = [sys.executable, "-m", "teleclaude", "hook", verb, "--agent", "codex"]
    return subprocess.run(
        argv, input=json.dumps(payload), env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def usage(cli_env) -> dict[str, float]:
    windows = AvailabilityStore(cli_env["TELECLAUDE_DB"]).usage(datetime.now(UTC)).get("codex", ())
    return {w.window: w.used_percent for w in windows}


@pytest.mark.parametrize(
    ("verb", "event"),
    [
        ("prompt", {"hook_event_name": "UserPromptSubmit", "prompt": "go"}),
        ("stop", {"hook_event_name": "Stop"}),
    ],
)
def test_codexs_hooks_keep_the_usage_its_rollout_reports(cli_env, tmp_path, verb, event):
    path = rollout(tmp_path / "rollout.jsonl", 95.0)
    payload = {**event, "session_id": "s", "turn_id": "t", "cwd": str(tmp_path), "transcript_path": str(path)}
    done = hook(cli_env, verb, payload, tmp_path)
    assert (done.returncode, done.stdout) == (0, "")
    assert usage(cli_env) == {"primary": 95.0, "secondary": 22.0}


def test_a_missing_or_unreadable_rollout_records_nothing_and_breaks_nothing(cli_env, tmp_path):
    for path in (tmp_path / "gone.jsonl", tmp_path):
        payload = {"hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path), "transcript_path": str(path)}
        done = hook(cli_env, "prompt", payload, tmp_path)
        assert (done.returncode, done.stdout) == (0, "")
    assert usage(cli_env) == {}
