"""The ssh command lines teleclaude builds for a `[computers.NAME]` (no ssh is run here)."""

from __future__ import annotations

import shlex

from teleclaude.adapters.ssh import git_ssh_command, ssh_argv
from teleclaude.config.profiles import Computer


def test_git_gets_every_option_but_the_user_whatever_the_user_is_called():
    options = ("Compression=yes",)
    box = Computer("box", "box.example", "/srv/p", {}, user="ssh", port=2222, ssh_options=options)
    words = shlex.split(git_ssh_command(box))
    assert words[0] == "ssh" and "-l" not in words  # a user named like the program keeps the program
    assert "Compression=yes" in words and "2222" not in words  # git adds the port and user from its URL
    argv = ssh_argv(box, ["true"])
    assert argv[argv.index("-l") + 1] == "ssh" and argv[argv.index("-p") + 1] == "2222"
