"""A worker's hooks speak for its session only: each session has a key of its own, given to its worker alone
(TELECLAUDE_SESSION_KEY); a hook's record on the database (a turn end, a stop failure, the session's
transcript) must bring it, and a hook's mark on the pane (`@teleclaude_turn_end`, `@teleclaude_stop_failure`)
is sealed with it. Any process of the user may set any pane's options or name any session, as tmux and the
database allow; without the key it can no longer end another worker's turn or make its agent unavailable.
A session stored before keys existed has none (""), and takes what it always took.
"""

from __future__ import annotations

# hmac's own constant-time comparison where OpenSSL is missing: `hmac` loads OpenSSL (`_hashlib`, a few ms),
# which a tool-use hook comparing its key has no other use for
from _operator import _compare_digest as compare_digest

SESSION_KEY = "TELECLAUDE_SESSION_KEY"


def exit_channel(session_id: str) -> str:
    """The tmux wait-for channel a worker's pane signals when its CLI exits, and its stop hook when it
    recorded the turn's end: whoever waits on the session looks at once."""
    return f"tc-exit-{session_id}"


# Every worker's pane exit, and a worker's turn-end or stop-failure mark on its pane (a worker on another
# computer), also signals this channel of its tmux server: a run waits on a computer's workers through one
# client there (adapters/ssh.py `_Waker`), not one per worker. tmux keeps one signal no one waited for and
# drops the pair when a second comes: what a waiter misses so is still on the panes, read at the next look.
MOVED_CHANNEL = "tc-moved"


def same_key(stored: str, given: str) -> bool:
    """`given` is the session's key (compared in constant time)."""
    return compare_digest(_bytes(stored), _bytes(given))


def seal(key: str, session_id: str, option: str, payload: str) -> str:
    """The mark a hook puts on its pane: `payload` with a MAC over the session and the option it is for."""
    return f"{_mac(key, session_id, option, payload)} {payload}"


def unseal(key: str, session_id: str, option: str, mark: str) -> str | None:
    """The payload of a mark sealed with `key` for this session and option; None for any other mark."""
    mac, _, payload = mark.partition(" ")
    expected = _mac(key, session_id, option, payload)
    return payload if compare_digest(_bytes(mac), _bytes(expected)) else None


def _mac(key: str, session_id: str, option: str, payload: str) -> str:
    message = "\0".join((session_id, option, payload))
    return hmac_sha256(_bytes(key), _bytes(message))


# hmac.py's own pads, for its pure-Python HMAC
_PAD_IN, _PAD_OUT = bytes(x ^ 0x36 for x in range(256)), bytes(x ^ 0x5C for x in range(256))


def hmac_sha256(key: bytes, message: bytes) -> str:
    """`hmac.new(key, message, hashlib.sha256).hexdigest()`, as hmac.py computes it without OpenSSL, with the
    interpreter's own SHA-256: `hashlib` loads OpenSSL (`_hashlib`, ~5 ms), more than a hook sealing one
    mark spends on anything else."""
    try:
        import _sha256 as own  # type: ignore[import-not-found,unused-ignore]  # Python 3.11
    except ImportError:
        try:
            import _sha2 as own  # type: ignore[import-not-found,no-redef,unused-ignore]  # 3.12 on
        except ImportError:  # an interpreter built without its own: OpenSSL's
            import hashlib as own  # type: ignore[no-redef,unused-ignore]
    sha256 = own.sha256
    if len(key) > 64:  # SHA-256's block
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(key.translate(_PAD_IN) + message).digest()
    mac: str = sha256(key.translate(_PAD_OUT) + inner).hexdigest()
    return mac


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # an environment's undecodable bytes included


PROMPT_KEPT = 64 * 1024  # characters of the prompt a turn-end mark carries (a command line is short)


def turn_end_payload(stamp: int, prompt: str = "") -> str:
    """A stop hook's turn-end mark: when it ran, then (when its CLI says it) the prompt the model was sent,
    as JSON in printable ASCII (one line: a tmux option, a channel file)."""
    if not prompt:
        return str(stamp)
    from _json import encode_basestring_ascii  # json.dumps of a string, without json's `re`

    return f"{stamp} {encode_basestring_ascii(prompt[:PROMPT_KEPT])}"


def turn_end_stamp(payload: str) -> float | None:
    """When the stop hook that left a turn-end mark ran (epoch seconds); None for a mark without a time."""
    stamp, _, _ = payload.partition(" ")
    return int(stamp) / 1e9 if stamp.isdigit() else None


def turn_end_prompt(payload: str) -> str:
    """The prompt a turn-end mark carries ("" for none, or one that is not a JSON string)."""
    _, _, rest = payload.partition(" ")
    if not rest:
        return ""
    import json

    try:
        prompt = json.loads(rest)
    except ValueError:
        return ""
    return prompt if isinstance(prompt, str) else ""
