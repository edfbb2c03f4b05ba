"""review-findings.md: the reviewer's verdict."""

from __future__ import annotations

from teleclaude.planner.core.gate import gate_line
from teleclaude.planner.core.markdown import task_items
from teleclaude.planner.core.model import Review, TaskItem, Verdict

VERDICTS = ("APPROVE", "REQUEST CHANGES")


def verdict_items(text: str) -> tuple[tuple[str, TaskItem], ...]:
    """(verdict, task) for every task item whose text starts with a verdict (case and emphasis ignored)."""
    found = []
    for task in task_items(text):
        label = task.text.upper().lstrip("*_ ")
        verdict = next((v for v in VERDICTS if label.startswith(v)), None)
        if verdict:
            found.append((verdict, task))
    return tuple(found)


def parse_review(text: str) -> Review:
    """Approved only when `[x] APPROVE` is checked and `REQUEST CHANGES` is not; else fixes are due."""
    approve = request = 0
    verdicts = verdict_items(text)
    verdict_lines = len(verdicts)
    for verdict, task in verdicts:
        if verdict == "APPROVE":
            approve += task.checked
        else:
            request += task.checked
    if approve and not request:
        return Review(Verdict.APPROVED)
    if not verdict_lines:
        why = "no verdict line (`- [x] APPROVE` or `- [x] REQUEST CHANGES`)"
    elif approve and request:
        why = "both APPROVE and REQUEST CHANGES are checked"
    elif not request:
        why = "no verdict is checked"
    else:
        why = ""
    return Review(Verdict.CHANGES_REQUESTED, why, gate_line(text))
