"""review-findings.md: the reviewer's verdict."""

from __future__ import annotations

from teleclaude.core.markdown import task_items
from teleclaude.core.model import Review, Verdict


def parse_review(text: str) -> Review:
    """Approved only when `[x] APPROVE` is checked and `REQUEST CHANGES` is not; else fixes are due."""
    approve = request = 0
    verdict_lines = 0
    for task in task_items(text):
        label = task.text.upper().lstrip("*_ ")
        if label.startswith("APPROVE"):
            verdict_lines += 1
            approve += task.checked
        elif label.startswith("REQUEST CHANGES"):
            verdict_lines += 1
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
    return Review(Verdict.CHANGES_REQUESTED, why)
