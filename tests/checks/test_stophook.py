"""`teleclaude hook stop`: JSON in, JSON out, in each agent CLI's own contract."""

from __future__ import annotations

import json

import pytest

from teleclaude.runtime.hooks.stop import parse_event

# What each CLI sends (the fields teleclaude reads, plus a few it must ignore) and how it refuses a stop.
CONTRACTS: dict[str, tuple[dict[str, object], str]] = {
    "claude": (
        {
            "session_id": "s1",
            "transcript_path": "/t.jsonl",
            "hook_event_name": "Stop",
            "permission_mode": "default",
        },
        "block",
    ),
    "codex": (
        {
            "session_id": "s2",
            "turn_id": "t1",
            "hook_event_name": "Stop",
            "model": "gpt",
            "transcript_path": None,
        },
        "block",
    ),
    "gemini": (
        {
            "session_id": "s3",
            "hook_event_name": "AfterAgent",
            "prompt": "p",
            "prompt_response": "r",
            "timestamp": "x",
        },
        "deny",
    ),
}


@pytest.fixture
def stop(cli):
    def run(cwd, agent: str = "claude", active: bool = False, extra_args: tuple[str, ...] = ()):
        payload = {**CONTRACTS[agent][0], "cwd": str(cwd), "stop_hook_active": active}
        return cli("hook", "stop", *extra_args, stdin=json.dumps(payload))

    return run


@pytest.fixture
def tree(repo, add_tree):
    return add_tree(repo, "feat")


@pytest.mark.parametrize("agent", CONTRACTS)
def test_a_dirty_worktree_blocks_the_stop(stop, tree, tools, agent):
    tools.write(tree, "src/new.py", "print()\n")
    tools.write(tree, "todos/feat/implementation-plan.md", "# Plan\n## Group 1\n- [x] done\n")
    done = stop(tree, agent)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["decision"] == CONTRACTS[agent][1]
    assert "\n  src/" in answer["reason"]  # git status names an untracked folder, not each file
    assert "todos/feat/implementation-plan.md" in answer["reason"]
    assert "commit" in answer["reason"]
    assert set(answer) == {"decision", "reason"}


@pytest.mark.parametrize("agent", CONTRACTS)
def test_a_clean_worktree_lets_the_stop_through(stop, tree, agent):
    done = stop(tree, agent)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize("agent", CONTRACTS)
def test_stop_hook_active_always_lets_it_through(stop, tree, tools, agent):
    tools.write(tree, "src/new.py", "print()\n")
    done = stop(tree, agent, active=True)
    assert (done.returncode, done.stdout) == (0, "")


def test_a_subfolder_of_the_worktree_counts(stop, tree, tools):
    tools.write(tree, "src/deep/new.py", "x\n")
    assert json.loads(stop(tree / "src" / "deep").stdout)["decision"] == "block"


def test_agent_option_overrides_detection(stop, tree, tools):
    tools.write(tree, "src/new.py", "print()\n")
    done = stop(tree, "claude", extra_args=("--agent", "gemini"))
    assert json.loads(done.stdout)["decision"] == "deny"


def test_architect_work_in_the_main_checkout_blocks(stop, repo, tools):
    tools.write(repo, "todos/other/requirements.md", "# Other\n")
    answer = json.loads(stop(repo).stdout)
    assert answer["decision"] == "block"
    assert "todos/other/requirements.md" in answer["reason"]


def test_the_orchestrators_roadmap_mark_does_not_block(stop, repo, tools):
    # next_work marks `[ ]` -> `[>]` without committing; the orchestrator must still be able to stop.
    tools.write(
        repo, "todos/roadmap.md", (repo / "todos/roadmap.md").read_text().replace("[ ] feat", "[>] feat")
    )
    tools.write(repo, "src/unrelated.py", "x\n")
    done = stop(repo)
    assert (done.returncode, done.stdout) == (0, "")


def test_elsewhere_it_does_nothing(stop, tmp_path, tools):
    plain = tmp_path / "plain"
    plain.mkdir()
    tools.git(plain, "init", "-q")
    tools.write(plain, "dirty.txt", "x\n")
    for where in (plain, tmp_path, tmp_path / "does-not-exist"):
        done = stop(where)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_folder_under_trees_that_is_not_a_worktree_does_nothing(stop, repo, tools):
    tools.write(repo, "trees/stray/file.txt", "x\n")
    assert stop(repo / "trees" / "stray").stdout == ""


@pytest.mark.parametrize("agent", [*CONTRACTS, None])
def test_in_the_main_checkout_the_hook_answers_as_the_decision_function(stop, repo, tools, agent):
    """A stop in a main checkout is mostly answered before stop.py is imported (hooks/__init__.py): the
    same answer, for each situation, as `decide`'s."""
    from teleclaude.runtime.hooks import stop as stophook

    tools.write(repo, "trees/stray/file.txt", "x\n")
    situations = [
        ("src/unrelated.py", "x\n"),  # outside todos/: never blocks
        ("todos/roadmap.md", (repo / "todos/roadmap.md").read_text() + "- [ ] more\n"),
        ("todos/notes.md", "x\n"),  # beside the items' folders
        ("todos/feat/implementation-plan.md", "# Plan\n## Group 1\n- [x] done\n"),
        ("todos/other/requirements.md", "# Other\n"),
    ]
    args = () if agent is None else ("--agent", agent)
    for path, text in situations:
        tools.write(repo, path, text)
        for cwd in (repo, repo / "src", repo / "todos" / "feat", repo / "trees" / "stray"):
            decided = stophook.decide(stophook.parse_event(json.dumps({"cwd": str(cwd)}), agent))
            done = stop(cwd, agent or "claude", extra_args=args)
            assert (done.returncode, done.stderr) == (0, "")
            assert bool(done.stdout) is decided.block, (path, cwd)
            if decided.block:
                assert path in json.loads(done.stdout)["reason"]


def test_git_sent_to_another_repository_lets_the_stop_through(cli, repo, tools, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    tools.git(other, "init", "-q")
    tools.write(repo, "todos/other/requirements.md", "# Other\n")
    payload = json.dumps({**CONTRACTS["claude"][0], "cwd": str(repo)})
    for args in ((), ("--agent", "claude")):
        done = cli("hook", "stop", *args, stdin=payload, env={"GIT_DIR": str(other / ".git")})
        assert (done.returncode, done.stdout) == (0, "")


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '{"cwd": 42}'])
def test_malformed_input_never_breaks_the_agent(cli, stdin):
    done = cli("hook", "stop", stdin=stdin)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.startswith("teleclaude hook stop:")
    assert "Traceback" not in done.stderr


def test_the_decision_function_is_separate_from_printing(repo, add_tree, tools):
    from teleclaude.runtime.hooks import stop as stophook

    tree = add_tree(repo, "feat")
    tools.write(tree, "x.txt", "x\n")
    event = stophook.parse_event(json.dumps({"cwd": str(tree), "hook_event_name": "Stop"}))
    decision = stophook.decide(event)
    assert decision.block
    assert stophook.render(decision, "gemini").startswith('{"decision": "deny"')
    assert stophook.render(stophook.LET_THROUGH, "claude") == ""


def test_only_geminis_prompt_is_kept_for_the_unknown_command_check():
    gemini = '{"hook_event_name": "AfterAgent", "cwd": "/p", "prompt": "/x greeting"}'
    assert parse_event(gemini).prompt == "/x greeting"
    codex = '{"hook_event_name": "Stop", "cwd": "/p", "turn_id": "t", "prompt": "$next-build greeting"}'
    assert parse_event(codex).prompt == ""
