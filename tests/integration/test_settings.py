import stat
import subprocess
import sys
from pathlib import Path

import pytest

from teleclaude.adapters import trust_store
from teleclaude.adapters.settings import config_sources, load_config
from teleclaude.config.matrix import Config
from teleclaude.config.parse import ConfigError
from teleclaude.planner.core.model import AgentChoice

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_without_files_the_defaults_apply(home, project):
    assert config_sources(project, {"HOME": str(home)}) == []
    assert load_config(project, {"HOME": str(home)}) == Config()


def test_the_project_file_overrides_the_user_file(home, project):
    user = write(home / ".config/teleclaude/teleclaude.toml", "max_review_rounds = 5\nagents = ['claude']")
    ours = write(project / "teleclaude.toml", "max_review_rounds = 2")
    env = {"HOME": str(home)}
    assert [path for path, _ in config_sources(project, env)] == [str(user), str(ours)]
    config = load_config(project, env)
    assert config.max_review_rounds == 2
    assert config.agents == ("claude",)


def test_xdg_config_home_replaces_dot_config(home, project, tmp_path):
    write(home / ".config/teleclaude/teleclaude.toml", "max_review_rounds = 5")
    write(tmp_path / "xdg/teleclaude/teleclaude.toml", "[matrix]\ncommit = ['codex:fast']")
    config = load_config(project, {"HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert config.matrix["commit"] == (AgentChoice("codex", "fast"),)
    assert config.max_review_rounds == Config().max_review_rounds


def test_only_a_project_file_is_read_when_there_is_no_home(project):
    write(project / "teleclaude.toml", "max_review_rounds = 7")
    assert load_config(str(project), {}).max_review_rounds == 7


def test_a_mistake_names_the_file(home, project):
    bad = write(project / "teleclaude.toml", "[matrix]\nbuild = ['claude:fastest']")
    with pytest.raises(ConfigError) as caught:
        load_config(project, {"HOME": str(home)})
    assert caught.value.path == str(bad)
    assert "matrix.build[0]" in str(caught.value)


def test_a_file_that_is_not_utf8_is_a_config_error(home, project):
    bad = write(home / ".config/teleclaude/teleclaude.toml", b"agents = ['\xff']")
    with pytest.raises(ConfigError) as caught:
        load_config(project, {"HOME": str(home)})
    assert caught.value.path == str(bad)
    assert "UTF-8" in str(caught.value)


def test_a_file_that_cannot_be_read_is_a_config_error(home, project):
    (project / "teleclaude.toml").mkdir()  # unreadable even for root
    with pytest.raises(ConfigError) as caught:
        load_config(project, {"HOME": str(home)})
    assert caught.value.path == str(project / "teleclaude.toml")


def test_loading_without_files_does_not_import_tomllib(home, project):
    code = (
        "import sys; from teleclaude.adapters.settings import load_config; "
        f"load_config({str(project)!r}, {{'HOME': {str(home)!r}}}); "
        "print('tomllib' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO)},
    )
    assert result.stdout.strip() == "False"


# --- trust: the project's file sets what starts processes only in a content the user trusted --------------

BINARY = '[runtime.agents.claude]\nbinary = "/bin/sh"\n'


def binary(project: Path, env: dict[str, str]) -> tuple[str, ...]:
    runtime = load_config(project, env).runtime
    assert runtime is not None
    return runtime.profiles["claude"].binaries if runtime.untrusted is None else ()


def test_a_project_file_applies_what_starts_processes_once_trusted_in_that_content(home, project):
    env = {"HOME": str(home)}
    settings = write(project / "teleclaude.toml", BINARY)
    assert binary(project, env) == ()
    trust_store.record(settings, settings.read_bytes(), env)
    assert binary(project, env) == ("/bin/sh",)
    assert stat.S_IMODE(trust_store.trust_path(env).stat().st_mode) == 0o600
    write(settings, BINARY + "# changed\n")
    assert binary(project, env) == ()
    trust_store.record(settings, settings.read_bytes(), env)
    assert binary(project, env) == ("/bin/sh",)
    trust_store.record(settings, None, env)
    assert binary(project, env) == ()


def test_the_users_own_file_needs_no_trust(home, project):
    write(home / ".config/teleclaude/teleclaude.toml", BINARY)
    assert binary(project, {"HOME": str(home)}) == ("/bin/sh",)


@pytest.mark.parametrize("spoil", ["others_write", "not_json", "folder"])
def test_a_trust_store_that_is_not_the_users_own_trusts_nothing(home, project, spoil):
    env = {"HOME": str(home)}
    settings = write(project / "teleclaude.toml", BINARY)
    trust_store.record(settings, settings.read_bytes(), env)
    store = trust_store.trust_path(env)
    if spoil == "others_write":
        store.chmod(0o666)
    elif spoil == "not_json":
        store.write_text("[")
    else:
        store.unlink()
        store.mkdir()
    assert binary(project, env) == ()
    with pytest.raises(trust_store.TrustStoreError):
        trust_store.record(settings, settings.read_bytes(), env)
