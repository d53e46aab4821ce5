"""Ticket sources (issue 28): where ``orchestrator batch`` finds its tickets. Pure.

[[sources]]                  # today's ticket files (the default, without any source)
kind = "directory"
path = "tickets"

[[sources]]                  # open GitHub issues with a label
kind = "github"
repo = "owner/name"
label = "orchestrate"
assignee = "bot"             # optional
token_env = "GITHUB_TOKEN"   # the variable's name, never the token
api_url = "https://api.github.com"
repository = "https://github.com/owner/name.git"   # what to clone (default)
base_branch = "main"
kind_labels = { bug = "bug-fix" }                  # label → ticket kind
status_labels = false        # true: the issue carries orchestrator:<run's status>

[[sources]]                  # open GitLab issues with a label
kind = "gitlab"
project = "group/sub/name"
label = "orchestrate"
base_url = "https://gitlab.com"
token_env = "GITLAB_TOKEN"
repository = "https://gitlab.com/group/sub/name.git"
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from orchestrator.domain.tickets import TicketKind
from orchestrator.domain.validation import Frozen, Name, NonEmptyStr, StrictBool, StrictStr

SecretEnv = Annotated[StrictStr, Field(pattern=r"^[A-Z_][A-Z0-9_]{0,63}$")]
Label = Annotated[StrictStr, Field(min_length=1, max_length=100, pattern=r"^[^,\x00-\x1f]+$")]
HttpUrl = Annotated[StrictStr, Field(max_length=500, pattern=r"^https?://[^\s@/]+(/[^\s@]*)?$")]
Branch = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")]
_SEGMENT = r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,99}"


def _no_dot_segments(path: str) -> str:
    if any(segment.strip(".") == "" for segment in path.split("/")):
        raise ValueError(f"'.' and '..' are not names (got {path!r})")
    return path


GitHubRepo = Annotated[
    StrictStr, Field(pattern=rf"^{_SEGMENT}/{_SEGMENT}$"), AfterValidator(_no_dot_segments)
]
GitLabProject = Annotated[
    StrictStr,
    Field(pattern=rf"^{_SEGMENT}(/{_SEGMENT}){{1,19}}$"),
    AfterValidator(_no_dot_segments),
]
DEFAULT_KIND_LABELS: dict[str, TicketKind] = {"bug": TicketKind.BUG_FIX}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class DirectorySource(Frozen):
    kind: Literal["directory"]
    path: NonEmptyStr = "tickets"
    name: Name | None = None

    @property
    def source_id(self) -> str:
        return self.name or f"dir-{_slug(self.path) or 'root'}"[:64]


class _ForgeSource(Frozen):
    label: Label
    name: Name | None = None
    repository: NonEmptyStr | None = None
    base_branch: Branch = "main"
    kind_labels: dict[Label, TicketKind] = Field(
        default_factory=lambda: dict(DEFAULT_KIND_LABELS), max_length=64
    )
    # One ``orchestrator:<state>`` label on the issue beside the status comment.
    status_labels: StrictBool = False

    @property
    def source_id(self) -> str:
        prefix, path, _ = _where(self)
        return self.name or f"{prefix}-{_slug(path)}"[:64]

    @property
    def clone_url(self) -> str:
        return self.repository or _where(self)[2]

    def kind_of(self, labels: tuple[str, ...]) -> TicketKind:
        """The first label with a kind, in the issue's order; else a feature."""
        for label in labels:
            if label in self.kind_labels:
                return self.kind_labels[label]
        return TicketKind.FEATURE


class GitHubSource(_ForgeSource):
    kind: Literal["github"]
    repo: GitHubRepo
    assignee: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9-]{1,39}$")] | None = None
    token_env: SecretEnv = "GITHUB_TOKEN"
    api_url: HttpUrl = "https://api.github.com"


class GitLabSource(_ForgeSource):
    kind: Literal["gitlab"]
    project: GitLabProject
    base_url: HttpUrl = "https://gitlab.com"
    token_env: SecretEnv = "GITLAB_TOKEN"


def _where(source: _ForgeSource) -> tuple[str, str, str]:
    """A forge source's id prefix, project path and default clone URL."""
    if isinstance(source, GitHubSource):
        return "gh", source.repo, f"https://github.com/{source.repo}.git"
    assert isinstance(source, GitLabSource)
    return "gl", source.project, f"{source.base_url.rstrip('/')}/{source.project}.git"


Source = Annotated[DirectorySource | GitHubSource | GitLabSource, Field(discriminator="kind")]
ForgeSource = GitHubSource | GitLabSource
