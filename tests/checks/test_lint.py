"""`teleclaude lint`: one case per code (pure), then the command on real checkouts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from teleclaude.planner.core.lint import SEVERITY, Severity, lint, lint_roadmap

REPO_ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): (?P<code>[A-Z_]+) (?P<severity>error|warning): .+$")

GOOD_PLAN = "# Plan\n## Group 1\n- [ ] a\n"

# (code, files, done/ names, expected (path, line))
CASES = [
    ("INVALID_SLUG", {"todos/roadmap.md": "- [ ] ok\n- [ ] Not_A_Slug — x\n"}, (), ("todos/roadmap.md", 2)),
    ("INVALID_DEPENDENCY", {"todos/roadmap.md": "- [ ] ok (after: Bad!) — x\n"}, (), ("todos/roadmap.md", 1)),
    (
        "DUPLICATE_SLUG",
        {"todos/roadmap.md": "- [ ] a\n- [x] b\n- [ ] a — again\n"},
        (),
        ("todos/roadmap.md", 3),
    ),
    (
        "CYCLIC_DEPENDENCY",
        {"todos/roadmap.md": "- [ ] a (after: c)\n- [ ] b (after: a)\n- [ ] c (after: b)\n"},
        (),
        ("todos/roadmap.md", 1),
    ),
    (
        "CYCLIC_DEPENDENCY",
        {"todos/roadmap.md": "- [ ] x\n- [ ] me (after: me)\n"},
        (),
        ("todos/roadmap.md", 2),
    ),
    ("ACTIVE_BLOCKED", {"todos/roadmap.md": "- [ ] a\n- [>] b (after: a)\n"}, (), ("todos/roadmap.md", 2)),
    ("UNKNOWN_DEPENDENCY", {"todos/roadmap.md": "- [ ] a (after: ghost)\n"}, (), ("todos/roadmap.md", 1)),
    (
        "MISSPELLED_DEPENDENCY",
        {"todos/roadmap.md": "- [ ] subtract\n- [ ] mul (after: subtrac) — times\n"},
        (),
        ("todos/roadmap.md", 2),
    ),
    (
        "DEPENDENCY_NOT_READ",
        {"todos/roadmap.md": "- [ ] subtract\n- [ ] add (afer: subtract) — plus\n"},
        (),
        ("todos/roadmap.md", 2),
    ),
    (
        "DEPENDENCY_NOT_READ",
        {"todos/roadmap.md": "- [ ] subtract\n- [ ] div — split (after: subtract)\n"},
        (),
        ("todos/roadmap.md", 2),
    ),
    ("MALFORMED_ITEM", {"todos/roadmap.md": "- [ ] a\n\n- [] b — no space\n"}, (), ("todos/roadmap.md", 3)),
    ("MALFORMED_ITEM", {"todos/roadmap.md": "- [ ] a\n-[ ] b glued to a\n"}, (), ("todos/roadmap.md", 2)),
    ("MALFORMED_ITEM", {"todos/roadmap.md": "Intro\n\n[ ] no bullet\n"}, (), ("todos/roadmap.md", 3)),
    ("MALFORMED_ITEM", {"todos/bugs.md": "- [o] crash on start\n"}, (), ("todos/bugs.md", 1)),
    ("HIDDEN_ITEM", {"todos/roadmap.md": "- [ ] a\n\f- [ ] b\n"}, (), ("todos/roadmap.md", 2)),
    ("HIDDEN_ITEM", {"todos/bugs.md": "Crashes:\u2028- [ ] on start\n"}, (), ("todos/bugs.md", 1)),
    ("CONFLICT_MARKER", {"todos/roadmap.md": "- [ ] a\n<<<<<<< HEAD\n"}, (), ("todos/roadmap.md", 2)),
    ("ENCODING", {"todos/roadmap.md": "-\0 \0[\0 \0]\0 \0a\0\n"}, (), ("todos/roadmap.md", 0)),
    ("NO_BUILD_TASK", {"todos/a/implementation-plan.md": "# Plan\n## Group 5\n- [ ] deploy\n"}, (), None),
    (
        "GROUP_HEADING",
        {"todos/a/implementation-plan.md": "## Groups 1-2\n## Group 1\n- [ ] a\n"},
        (),
        ("todos/a/implementation-plan.md", 1),
    ),
    (
        "GROUP_HEADING",
        {"todos/a/implementation-plan.md": "## Group 1\n- [ ] a\n## Group 1: again\n- [ ] b\n"},
        (),
        ("todos/a/implementation-plan.md", 3),
    ),
    (
        "TASK_OUTSIDE_GROUP",
        {"todos/a/implementation-plan.md": "# Plan\n- [ ] early\n## Group 1\n- [ ] a\n"},
        (),
        ("todos/a/implementation-plan.md", 2),
    ),
    (
        "VERDICT",
        {"todos/a/review-findings.md": "- [x] APPROVE\n- [x] REQUEST CHANGES\n"},
        (),
        ("todos/a/review-findings.md", 2),
    ),
    ("VERDICT", {"todos/a/review-findings.md": "- [ ] APPROVE\n- [ ] REQUEST CHANGES\n"}, (), None),
    ("VERDICT", {"todos/a/review-findings.md": "Looks good to me.\n"}, (), None),
    ("BUG_NOT_A_TASK", {"todos/bugs.md": "- [ ] real\n- just a note\n"}, (), ("todos/bugs.md", 2)),
    ("ARCHIVE_NAME", {}, ("001-a", "misc"), ("done/misc", 0)),
    ("ARCHIVE_NAME", {}, ("001-a", "002-Bad_Slug"), ("done/002-Bad_Slug", 0)),
    ("ARCHIVE_NUMBER_DUPLICATE", {}, ("001-a", "002-b", "002-c"), ("done/002-c", 0)),
    ("ARCHIVE_NUMBER_GAP", {}, ("001-a", "003-c"), ("done", 0)),
]


@pytest.mark.parametrize(("code", "files", "done", "where"), CASES, ids=[c[0] for c in CASES])
def test_each_code(code, files, done, where):
    findings = [f for f in lint(files, done) if f.code == code]
    assert len(findings) == 1, lint(files, done)
    finding = findings[0]
    assert finding.severity is SEVERITY[code]
    if where:
        assert (finding.path, finding.line) == where
    assert LINE.match(finding.to_text())


def test_every_code_has_a_case():
    # NO_ROADMAP concerns a whole checkout, not files: test_a_checkout_without_a_roadmap_is_not_ok
    assert {case[0] for case in CASES} | {"NO_ROADMAP"} == set(SEVERITY)


@pytest.mark.parametrize(
    "files",
    [
        {"todos/roadmap.md": "# R\n- [x] a — x\n- [>] b (after: a, c) — y\n- [x] Old free-text history\n"},
        {"todos/roadmap.md": "```\n- [] in code\n```\n> - [] quoted\n\n- [ ] a\n  continuation\n"},
        {"todos/a/implementation-plan.md": GOOD_PLAN + "## Group 5: After\n- [ ] deploy\n"},
        {"todos/a/implementation-plan.md": "# Plan without groups\n- [ ] a\n"},
        {"todos/a/implementation-plan.md": "   \n"},  # empty: a missing plan, which next_prepare handles
        {"todos/a/review-findings.md": "# Review\n- [ ] APPROVE\n- [x] **REQUEST CHANGES**\n- [ ] fix x\n"},
        {"todos/bugs.md": "# Bugs\n- [ ] crash\n  - repro: run it\n- [x] fixed\n"},
    ],
)
def test_clean_files_have_no_findings(files):
    assert lint(files, ("001-c",)) == ()


def test_an_archived_dependency_is_known_and_done():
    roadmap = {"todos/roadmap.md": "- [>] b (after: a) — y\n"}
    assert lint(roadmap, ("001-a",)) == ()
    codes = {f.code for f in lint(roadmap, ())}
    assert codes == {"UNKNOWN_DEPENDENCY"}  # absent and not archived: delivered, or a typo


def parts(line: str) -> re.Match[str]:
    """The fields of one finding's line; the test fails on a line that is not one."""
    match = LINE.match(line)
    assert match, line
    return match


def test_warnings_and_errors_are_told_apart():
    findings = lint({"todos/roadmap.md": "- [ ] a (after: ghost)\n- [ ] a\n"})
    assert {(f.code, f.severity) for f in findings} == {
        ("UNKNOWN_DEPENDENCY", Severity.WARNING),
        ("DUPLICATE_SLUG", Severity.ERROR),
    }
    assert [parts(f.to_text())["severity"] for f in findings] == ["warning", "error"]


# --- the command ------------------------------------------------------------------------------------


def test_a_clean_checkout_exits_0(repo, cli):
    done = cli("lint", "--cwd", str(repo), process=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("OK")


def test_a_checkout_without_a_roadmap_is_not_ok(repo, cli):
    """Nothing to check is said, with the command that makes the roadmap; naming files checks only them."""
    (repo / "todos" / "roadmap.md").unlink()
    done = cli("lint", "--cwd", str(repo))
    assert done.returncode == 0, done.stdout + done.stderr
    assert parts(done.stdout.splitlines()[0])["code"] == "NO_ROADMAP"
    assert "teleclaude init" in done.stdout
    assert "NO_ROADMAP" not in cli("lint", "todos/feat/implementation-plan.md", "--cwd", str(repo)).stdout


def test_errors_exit_1_one_line_each(repo, cli, tools):
    tools.write(repo, "todos/roadmap.md", "- [ ] feat\n- [ ] feat — twice\n- [ ] Bad\n")
    tools.write(repo, "todos/feat/review-findings.md", "- [x] APPROVE\n- [x] REQUEST CHANGES\n")
    done = cli("lint", cwd=repo, process=True)
    assert done.returncode == 1
    lines = [parts(line) for line in done.stdout.splitlines()[:-1]]
    assert [(m["path"], m["line"], m["code"]) for m in lines] == [
        ("todos/feat/review-findings.md", "2", "VERDICT"),
        ("todos/roadmap.md", "2", "DUPLICATE_SLUG"),
        ("todos/roadmap.md", "3", "INVALID_SLUG"),
    ]


def test_warnings_alone_exit_0(repo, cli, tools):
    tools.write(repo, "todos/roadmap.md", "- [ ] feat (after: ghost)\n")
    done = cli("lint", "--cwd", str(repo))
    assert done.returncode == 0
    assert parts(done.stdout.splitlines()[0])["severity"] == "warning"


def test_json_is_a_list_of_objects(repo, cli, tools):
    tools.write(repo, "todos/roadmap.md", "- [ ] feat\n- [ ] feat\n")
    done = cli("lint", "--json", "--cwd", str(repo))
    assert done.returncode == 1
    assert json.loads(done.stdout) == [
        {
            "path": "todos/roadmap.md",
            "line": 2,
            "code": "DUPLICATE_SLUG",
            "severity": "error",
            "message": json.loads(done.stdout)[0]["message"],
        }
    ]
    assert (
        json.loads(cli("lint", "--json", "--cwd", str(repo), "todos/feat/implementation-plan.md").stdout)
        == []
    )


def test_files_limit_the_check(repo, cli, tools):
    tools.write(repo, "todos/roadmap.md", "- [ ] Bad\n")
    tools.write(repo, "todos/feat/review-findings.md", "no verdict\n")
    done = cli("lint", "todos/feat/review-findings.md", cwd=repo)
    assert done.returncode == 1
    assert [parts(line)["code"] for line in done.stdout.splitlines()[:-1]] == ["VERDICT"]
    # names relative to the current folder
    done = cli("lint", "review-findings.md", cwd=repo / "todos" / "feat")
    assert [parts(line)["code"] for line in done.stdout.splitlines()[:-1]] == ["VERDICT"]


def test_done_names_are_checked(repo, cli):
    (repo / "done" / "001-feat").mkdir(parents=True)
    (repo / "done" / "old-stuff").mkdir()
    done = cli("lint", "--cwd", str(repo))
    assert done.returncode == 1
    assert parts(done.stdout.splitlines()[0]).group("path", "code") == ("done/old-stuff", "ARCHIVE_NAME")


def test_a_worktree_lints_its_own_copy(repo, cli, tools, add_tree):
    tree = add_tree(repo, "feat")
    tools.write(tree, "todos/feat/review-findings.md", "- [x] APPROVE\n- [x] APPROVE\n")
    done = cli("lint", cwd=tree)
    assert done.returncode == 1
    assert "todos/feat/review-findings.md:2: VERDICT error" in done.stdout
    assert cli("lint", cwd=repo).returncode == 0


@pytest.mark.parametrize(
    ("args", "code"),
    [(("--cwd", "{outside}"), "NOT_A_GIT_REPO"), (("todos/missing.md",), "FILE_ERROR")],
)
def test_operational_errors_are_error_codes(repo, cli, tmp_path, args, code):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    done = cli("lint", *(a.format(outside=outside) for a in args), cwd=repo, process=True)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == f"ERROR: {code}"
    assert "Traceback" not in done.stderr


def test_the_pre_commit_framework_hook_runs_lint_on_the_files_it_matches(repo, cli, tools):
    yaml = pytest.importorskip("yaml")
    (hook,) = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())
    assert (hook["id"], hook["language"], hook["pass_filenames"]) == ("teleclaude-lint", "python", True)
    matching = [
        p for p in ("todos/roadmap.md", "done/001-x/a.md", "src/todos.py") if re.search(hook["files"], p)
    ]
    assert matching == ["todos/roadmap.md", "done/001-x/a.md"]
    tools.write(repo, "todos/roadmap.md", "- [ ] Bad_Slug\n")
    command = hook["entry"].split()
    assert command[0] == "teleclaude"
    done = cli(*command[1:], "todos/roadmap.md", cwd=repo, process=True)
    assert done.returncode == 1
    assert "INVALID_SLUG" in done.stdout


def test_a_file_outside_the_checkout_is_an_invalid_argument(repo, cli, tmp_path):
    outside = tmp_path / "roadmap.md"
    outside.write_text("- [ ] x\n")
    done = cli("lint", str(outside), cwd=repo)
    assert (done.returncode, done.stdout.splitlines()[0]) == (1, "ERROR: INVALID_ARGUMENT")


def test_other_parentheses_in_a_description_and_a_far_unknown_dependency_are_not_typos():
    text = "- [ ] a — see (note: b) and (ages: 3)\n- [ ] b (after: ghost) — x\n"
    assert [f.code for f in lint_roadmap(text)] == ["UNKNOWN_DEPENDENCY"]
