"""`datetime`'s classes for what runs at every agent event (the hooks' readers), without `datetime.py`: in
CPython that module defines every class in Python before `from _datetime import *` puts the C ones in their
place, 6.5 M instructions (a sixth of Python's own start) for classes it then throws away. These are the
same objects `datetime` gives (its pure-Python ones where `_datetime` is missing)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from datetime import UTC, datetime, timedelta, timezone, tzinfo
else:
    try:
        from _datetime import datetime, timedelta, timezone, tzinfo
    except ImportError:  # an interpreter without the accelerator
        from datetime import datetime, timedelta, timezone, tzinfo
    UTC = timezone.utc  # noqa: UP017  # datetime.UTC is this, and importing datetime is what is spared

__all__ = ["UTC", "datetime", "timedelta", "timezone", "tzinfo"]
