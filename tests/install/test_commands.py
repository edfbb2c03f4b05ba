"""The role commands and templates say exactly what the planner's parsers accept.

Examples are taken from the installed text of each command (fenced ```markdown blocks, and the templates
the commands embed), then parsed with the planner's own parsers.
"""

from __future__ import annotations

import re

import pytest

from teleclaude.agents import formats
from teleclaude.planner.core import layout
from teleclaude.planner.core.bugs import open_bugs
from teleclaude.planner.core.decide import ARCHITECT_NOTE
from teleclaude.planner.core.model import Step
from teleclaude.planner.core.plan import parse_plan
from teleclaude.planner.core.review import parse_review
from teleclaude.setup import install

ORCHESTRATORS = {"next-prepare", "next-work"}
FENCE = re.compile(r"^(`{3,})markdown\n(.*?)^\1$", re.MULTILINE | re.DOTALL)
YAML_INDICATORS = tuple("-?:,[]{}#&*!|>'\"%@`")


def blocks(name: str) -> list[str]:
    """The ```markdown blocks of a command as installed (templates included), in order."""
    return [match[2] for match in FENCE.finditer(install.command_markdown(name))]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_there_is_a_command_for_every_step_and_both_orchestrator_loops():
    assert set(install.command_names()) == {step.command for step in Step} | ORCHESTRATORS


@pytest.mark.parametrize("name", install.command_names())
def test_every_command_has_front_matter_with_description_and_argument_hint(name):
    meta, body = formats.split_front_matter(install.command_markdown(name))
    assert set(meta) == {"description", "argument-hint"}
    for value in meta.values():
        # plain YAML scalars, so Claude Code's YAML and Codex's line parser read the same text
        assert value and ": " not in value and not value.startswith(YAML_INDICATORS), value
    assert body.strip()


@pytest.mark.parametrize("name", install.command_names())
def test_every_command_has_role_inputs_steps_files_report_and_never(name):
    text = install.command_markdown(name)
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert "Inputs" in headings and "Report" in headings and "Never" in headings
    assert "Steps" in headings or "The loop" in headings
    assert re.search(r"^1\. ", text, re.MULTILINE)
    assert "$ARGUMENTS" in text
    assert re.search(r"`(DONE|STOPPED): " + re.escape(name), text), "a report line naming the command"


@pytest.mark.parametrize("name", install.command_names())
def test_no_command_uses_gemini_template_syntax(name):
    # Gemini CLI would run `!{...}` as a shell command and inline `@{...}` as a file.
    text = install.command_markdown(name)
    assert "!{" not in text and "@{" not in text and "{{" not in text
    assert install.TEMPLATE_MARK not in text, "every template marker is replaced when installed"


def test_the_templates_are_the_files_the_planner_reads():
    for name in (layout.REQUIREMENTS, layout.PLAN, layout.REVIEW):
        assert install.template_text(name).strip()


def test_an_empty_plan_template_is_not_prepared_but_a_plan_written_as_instructed_is():
    template, example = blocks("next-plan")
    assert template == install.template_text("implementation-plan.md")
    assert not parse_plan(template).has_build_tasks
    plan = parse_plan(example)
    assert plan.has_groups and plan.has_build_tasks and not plan.built
    assert plan.build_tasks == 5  # Group 5 is after the build: not counted


def test_a_plan_ticked_as_the_builder_is_told_is_built():
    (example,) = blocks("next-build")
    plan = parse_plan(example)
    assert plan.build_tasks == 3 and plan.built


def test_filling_the_template_groups_gives_build_tasks():
    template = install.template_text("implementation-plan.md")
    filled = re.sub(r"^(## Group [1-4].*)$", r"\1\n\n- [ ] a task", template, flags=re.MULTILINE)
    plan = parse_plan(filled)
    assert (plan.build_tasks, plan.open_build_tasks) == (4, 4)
    assert parse_plan(filled.replace("- [ ] a task", "- [x] a task")).built


def test_review_verdicts_parse_as_the_reviewer_is_told():
    template, approve, request = blocks("next-review")
    assert template == install.template_text("review-findings.md")
    assert not parse_review(template).approved  # nothing ticked yet
    assert parse_review(approve).approved
    assert not parse_review(request).approved and parse_review(request).why == ""
    assert parse_review(template.replace("- [ ] APPROVE", "- [x] APPROVE")).approved
    changes = parse_review(template.replace("- [ ] REQUEST CHANGES", "- [x] REQUEST CHANGES"))
    assert not changes.approved and changes.why == ""
    both = template.replace("- [ ] APPROVE", "- [x] APPROVE").replace("- [ ]", "- [x]")
    assert not parse_review(both).approved


def test_the_reviewer_names_the_exact_verdict_lines_sections_and_diff_base():
    text = install.command_markdown("next-review")
    for literal in (
        "- [x] APPROVE",
        "- [x] REQUEST CHANGES",
        "## Critical",
        "## Important",
        "## Suggestions",
    ):
        assert literal in text
    assert "git merge-base HEAD main" in text
    assert "todos/$ARGUMENTS/review-findings.md" in text


def test_the_fixer_deletes_the_findings_in_its_commit():
    text = install.command_markdown("next-fix-review")
    assert "git rm todos/$ARGUMENTS/review-findings.md" in text
    assert "## Critical" in text and "## Important" in text


def test_the_finalizer_leaves_the_merge_archive_and_marker_to_teleclaude_finalize():
    text = install.command_markdown("next-finalize")
    assert "teleclaude finalize $ARGUMENTS" in text  # one finalize at a time, under the project lock
    assert "done/NNN-$ARGUMENTS/" in text
    never = text.split("## Never")[1]
    assert "stash" in never and "teleclaude finalize" in never


def test_the_bug_fixer_ticks_bugs_as_the_planner_counts_them():
    (example,) = blocks("next-bugs")
    assert open_bugs(example) == ()
    assert len(open_bugs(example.replace("[x]", "[ ]"))) == 2


def test_requirements_template_counts_as_written_only_once_copied():
    (template,) = blocks("next-requirements")
    assert template == install.template_text("requirements.md")
    assert "todos/$ARGUMENTS/requirements.md" in install.command_markdown("next-requirements")


@pytest.mark.parametrize("name", sorted(ORCHESTRATORS))
def test_orchestrators_know_every_answer_and_how_to_mark_agents(name):
    text = flat(install.command_markdown(name))
    tool = "teleclaude__" + name.replace("-", "_")
    for literal in (f"{tool}()", "TOOL_CALL:", "SELF:", "ERROR:", "teleclaude__mark_agent_unavailable"):
        assert literal in text
    assert "overloaded" in text and "unresponsive" in text
    assert ("PREPARED:" if name == "next-prepare" else "COMPLETE:") in text


def test_the_prepare_orchestrator_recognises_the_architect_note():
    assert ARCHITECT_NOTE in flat(install.command_markdown("next-prepare"))
