"""Issue 39.7: the usage on record cannot be made to lie. Any process of the user can report a window (run
`teleclaude hook statusline`, write a transcript its worker's hooks read), and a worker seals its pane's usage
mark with its own key: the record compared only the time each report was seen, so 80 % then 30 % of one
window showed 30 %, a late report of a window that had reset erased the current one, and a report dated
2100 kept every true report out."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.agents.profile import UsageWindow
from teleclaude.runtime.core.limits import decode_usage, encode_usage

from .conftest import hook

YEAR_2100 = datetime(2100, 1, 1, tzinfo=UTC)


def _status_line(env: dict[str, str], cwd, used: float, resets_at: datetime) -> None:
    """Claude Code's status line, as it runs it: this input on stdin."""
    five_hours = {"used_percentage": used, "resets_at": int(resets_at.timestamp())}
    status = {"model": {"display_name": "Opus"}, "rate_limits": {"five_hour": five_hours}}
    done = hook(env, cwd, "statusline", "--agent", "claude", stdin=json.dumps(status))
    assert done.returncode == 0 and done.stdout.startswith("Opus"), done.stdout + done.stderr


def _used() -> dict[str, float]:
    found = AvailabilityStore().usage(datetime.now(UTC)).get("claude", ())
    return {window.window: window.used_percent for window in found}


def test_within_one_window_the_use_on_record_only_grows(subprocess_env, tmp_path, cli):
    reset = (datetime.now(UTC) + timedelta(hours=3)).replace(microsecond=0)
    _status_line(subprocess_env, tmp_path, 80.0, reset)
    _status_line(subprocess_env, tmp_path, 30.0, reset)  # a stale CLI in another terminal
    assert _used() == {"5h": 80.0}
    assert "5h 80%" in cli("agents").stdout
    _status_line(subprocess_env, tmp_path, 5.0, reset + timedelta(hours=5))  # the next window: anew
    assert _used() == {"5h": 5.0}


def test_a_late_report_of_a_window_that_reset_leaves_the_current_one(subprocess_env, tmp_path):
    now = datetime.now(UTC).replace(microsecond=0)
    _status_line(subprocess_env, tmp_path, 20.0, now + timedelta(hours=3))
    _status_line(subprocess_env, tmp_path, 95.0, now - timedelta(minutes=2))  # the window before it
    assert _used() == {"5h": 20.0}


def test_a_report_from_the_future_neither_pins_the_record_nor_keeps_true_reports_out():
    store = AvailabilityStore()
    now = datetime.now(UTC).replace(microsecond=0)
    reset = now + timedelta(hours=3)
    for forged_reset in (reset, None, YEAR_2100):
        # a worker's own pane mark, sealed with its own key, dated 2100
        mark = encode_usage([UsageWindow("claude", "5h", 1.0, forged_reset, YEAR_2100)])
        store.record_usage(decode_usage("claude", mark))
        (kept,) = store.usage(datetime.now(UTC))["claude"]
        assert kept.seen_at <= datetime.now(UTC)  # seen now, at the latest
        store.record_usage([UsageWindow("claude", "5h", 70.0, reset, datetime.now(UTC))])  # the CLI's next
        assert _used() == {"5h": 70.0}, forged_reset
