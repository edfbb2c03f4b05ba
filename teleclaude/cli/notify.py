"""`teleclaude notify`: the `[notify]` settings in use (URLs by key and scheme alone), and `--test`, a test
message to each URL. Apprise is imported only by `--test` (see `teleclaude.cli.base`)."""

from __future__ import annotations

import argparse
import os

from teleclaude.cli.base import Command, add_cwd, print_value, write
from teleclaude.errors import Error, ErrorCode, guard


def _add_notify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--test",
        action="store_true",
        help="send a test message to each [notify] URL and say which took it",
    )
    add_cwd(parser)


def _run_notify(args: argparse.Namespace) -> int:
    from teleclaude.adapters import git as gitx
    from teleclaude.adapters import notify

    def settings():
        root = gitx.find_repo(args.cwd or os.getcwd()).root
        return root, (notify.checked(root) if args.test else notify.load_notify(root))

    found = guard(settings)()
    if isinstance(found, Error):
        return print_value(found)
    root, config = found
    if not config.targets:
        where = notify.notify_path() or "~/.config/teleclaude/notify.toml"
        return print_value(
            Error(
                ErrorCode.INVALID_CONFIG,
                f"no [notify] urls are set, so nothing is sent.\nSet them in {where} (mode 0600) or in "
                'teleclaude.toml, e.g. [notify] urls = ["ntfy://my-topic"]; then call again.',
            )
        )
    if not args.test:
        events = ", ".join(sorted(event.value for event in config.events)) or "none"
        write(f"OK: {len(config.targets)} URL{'s' if len(config.targets) != 1 else ''} set; nothing sent.")
        for target in config.targets:
            write(f"  {target.shown} from {target.path}")
        write(f"events: {events}; digests: {'yes' if config.digests else 'no'}")
        write(f"min_interval: {config.min_interval:g} s; timeout: {config.timeout:g} s")
        write("Next: teleclaude notify --test sends a test message to each.")
        return 0
    from teleclaude.runtime.core import notices

    results = notify.send_all(config.targets, notices.trial(str(root)), config.timeout)
    failed = [target for target, why in results.items() if why is not None]
    count = f"{len(results) - len(failed)} of {len(results)} URL{'s' if len(results) != 1 else ''}"
    write(f"ERROR: {ErrorCode.NOTIFY_FAILED.value}" if failed else f"OK: the test message went to {count}.")
    if failed:
        write(f"The test message went to {count}:")
    for target, why in results.items():
        write(f"  {'sent' if why is None else 'NOT SENT'}: {target.shown}" + (f" ({why})" if why else ""))
    if failed:
        write("Next: check each URL that failed (its service's token, host, topic), then call again.")
    return 1 if failed else 0


COMMANDS: tuple[Command, ...] = (
    Command(
        "notify",
        "the [notify] settings in use; --test sends a test message to each URL",
        _add_notify,
        _run_notify,
    ),
)
