"""Values the planner works with: parsed files, the steps it can name, and the actions it returns.

Everything here is a small frozen value. Parsers produce them, `decide` consumes them, `render` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from enum import Enum

# re-exported: made by the agent drivers' usage readers, read by the planner
from teleclaude.agents.usage import UsageWindow as UsageWindow
from teleclaude.errors import Call, Error

# --- parsed files -----------------------------------------------------------------------------------


class Marker(Enum):
    PENDING = " "
    ACTIVE = ">"
    DONE = "x"

    @classmethod
    def from_char(cls, char: str) -> Marker:
        return cls.DONE if char in "xX" else cls(char)


@dataclass(frozen=True)
class TaskItem:
    """A `- [?] text` list item found by the markdown pass; `line` is 1-based in the source file."""

    line: int
    mark: str
    text: str
    depth: int = 0

    @property
    def checked(self) -> bool:
        return self.mark in "xX"


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class RoadmapItem:
    slug: str
    marker: Marker
    line: int
    after: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True)
class Problem:
    """Something wrong in a file, located at a line (0 when it concerns the whole file)."""

    line: int
    code: str
    message: str


@dataclass(frozen=True)
class Roadmap:
    items: tuple[RoadmapItem, ...] = ()
    problems: tuple[Problem, ...] = ()

    def find(self, slug: str) -> RoadmapItem | None:
        return next((item for item in self.items if item.slug == slug), None)

    def open_items(self) -> tuple[RoadmapItem, ...]:
        """`[>]` items first, then `[ ]`, each in file order."""
        active = [i for i in self.items if i.marker is Marker.ACTIVE]
        pending = [i for i in self.items if i.marker is Marker.PENDING]
        return tuple(active + pending)


@dataclass(frozen=True)
class PlanStatus:
    """Build tasks are the checkboxes in Groups 1-4 (or every checkbox when a plan has no Group headings)."""

    build_tasks: int
    open_build_tasks: int
    has_groups: bool = False

    @property
    def has_build_tasks(self) -> bool:
        return self.build_tasks > 0

    @property
    def built(self) -> bool:
        return self.open_build_tasks == 0


class Verdict(Enum):
    APPROVED = "approved"
    CHANGES_REQUESTED = "changes requested"


@dataclass(frozen=True)
class Review:
    verdict: Verdict
    why: str = ""  # set when the verdict is not a clean single checked line
    gate: str = ""  # written by a red [checks] gate: the failing command and its result

    @property
    def approved(self) -> bool:
        return self.verdict is Verdict.APPROVED


class WorktreeState(Enum):
    ABSENT = "absent"
    PRESENT = "present"
    BROKEN = "broken"  # trees/{slug} exists but is not a worktree of this repository
    UNFINISHED = "unfinished"  # our own `git worktree add` was cut short: made again like an absent one


@dataclass(frozen=True)
class Worktree:
    state: WorktreeState
    problem: str = ""
    repair: str = ""  # the next step, when it is not "move it aside"


@dataclass(frozen=True)
class MainStatus:
    """The main checkout as `git status` sees it, limited to one item's `todos/{slug}/` folder."""

    has_commits: bool
    changes: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()


# --- steps and agents -------------------------------------------------------------------------------


class Step(Enum):
    """A command the planner can dispatch, with the row of the agent matrix that staffs it."""

    REQUIREMENTS = ("next-requirements", "requirements")
    PLAN = ("next-plan", "plan")
    BUGS = ("next-bugs", "bugs")
    BUILD = ("next-build", "build")
    REVIEW = ("next-review", "review")
    FIX = ("next-fix-review", "fix")
    FINALIZE = ("next-finalize", "finalize")
    FIX_MERGE = ("next-fix-merge", "fix")  # main moved on and conflicts with the branch: merge it in the tree
    COMMIT = ("commit-pending", "commit")

    @property
    def command(self) -> str:
        return self.value[0]

    @property
    def task(self) -> str:
        return self.value[1]

    @property
    def is_architect(self) -> bool:
        return self in (Step.REQUIREMENTS, Step.PLAN)


@dataclass(frozen=True)
class AgentChoice:
    agent: str
    thinking_mode: str


@dataclass(frozen=True)
class Unavailability:
    agent: str
    until: datetime  # aware, UTC
    reason: str = ""


# --- actions: what a call returns --------------------------------------------------------------------


@dataclass(frozen=True)
class Dispatch:
    """Start `step` for `slug` with `agent`; `subfolder` is None for work in the main checkout."""

    step: Step
    slug: str
    project: str
    agent: str
    thinking_mode: str
    subfolder: str | None = None
    note: str | None = None

    @property
    def command(self) -> str:
        # the same name for every CLI: how a CLI invokes it (`/next-build`, `$next-build`) is the
        # runtime's business (AgentProfile.command_sign)
        return self.step.command


@dataclass(frozen=True)
class RunYourself:
    """No agent of the step's row is available: the orchestrator does the step itself."""

    step: Step
    slug: str
    project: str
    subfolder: str | None
    unavailable: tuple[Unavailability, ...]
    again: Call  # the call to make afterwards, e.g. next_work


@dataclass(frozen=True)
class Prepared:
    slug: str


@dataclass(frozen=True)
class Complete:
    slug: str
    archive: str  # e.g. "done/005-my-slug/"


Action = Dispatch | RunYourself | Prepared | Complete | Error


@dataclass(frozen=True)
class AgentMarked:
    """An agent was marked unavailable until `until`, or available again (`until` None)."""

    agent: str
    until: datetime | None = None
    reason: str = ""
    now: datetime | None = None  # when it was marked: an `until` before it means available right away


@dataclass(frozen=True)
class AgentReport:
    """Every known agent and, for the unavailable ones, until when and why; each agent's windows its CLI
    last reported (those not yet reset), the headroom the planner holds them to, and the zone the reader's
    clock shows."""

    agents: tuple[str, ...]
    unavailable: tuple[Unavailability, ...]
    now: datetime
    usage: tuple[UsageWindow, ...] = ()
    headroom: float | None = None
    zone: tzinfo = UTC


# --- effects: file and git changes the app applies under the project lock -----------------------------


@dataclass(frozen=True)
class ClaimItem:
    """Mark the roadmap item `[ ]` -> `[>]`."""

    slug: str


@dataclass(frozen=True)
class CreateWorktree:
    slug: str


@dataclass(frozen=True)
class MarkDone:
    """Mark the roadmap item -> `[x]` after its archive folder appeared."""

    slug: str


Effect = ClaimItem | CreateWorktree | MarkDone


@dataclass(frozen=True)
class Decision:
    """What `decide` returns: effects to apply, then either the action or (None) a request to decide again."""

    slug: str | None
    action: Action | None
    effects: tuple[Effect, ...] = field(default=())
