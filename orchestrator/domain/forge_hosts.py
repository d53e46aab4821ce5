"""Where a forge is (issue 40): the one rule for where a forge token may be sent. Pure.

A token (``GITHUB_TOKEN``, ``GITLAB_TOKEN``, a source's ``token_env``) goes only to a
forge the operator named: a source's ``api_url`` (GitHub) or ``base_url`` (GitLab) in the
config, the orchestrator's own ``ORCHESTRATOR_GITHUB_API_URL`` / ``ORCHESTRATOR_GITLAB_URL``,
else the forge's public host. ``forge_location`` is that rule for every caller (issue 43:
preflight and ``doctor``, intake, status comments, approvals, the open-pr stage and its
egress), and says which of the three it was. A ticket or an issue never chooses it: a ticket's
``[origin]`` (written by intake from the config, but a file anyone may write) must name a
source of the config, that source's API, and that source's repository; otherwise it is
refused before any stage starts, so no request carries the token anywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol
from urllib.parse import urlsplit

from orchestrator.domain.sources import GitHubSource, GitLabSource, Source
from orchestrator.domain.tickets import Ticket

ForgeKind = Literal["github", "gitlab"]

PUBLIC_API: Final[Mapping[ForgeKind, str]] = {
    "github": "https://api.github.com",
    "gitlab": "https://gitlab.com",
}
# The orchestrator's own overrides of a forge's API (its environment, never a ticket's).
API_URL_ENV: Final[Mapping[ForgeKind, str]] = {
    "github": "ORCHESTRATOR_GITHUB_API_URL",
    "gitlab": "ORCHESTRATOR_GITLAB_URL",
}


def same_api(a: str, b: str) -> bool:
    """Whether two API base URLs are one: scheme and host compared without case, a
    trailing slash ignored."""

    def key(url: str) -> tuple[str, str, str]:
        parts = urlsplit(url.strip().rstrip("/"))
        return parts.scheme.lower(), parts.netloc.lower(), parts.path

    return key(a) == key(b)


def source_api(source: GitHubSource | GitLabSource) -> str:
    """The API a forge source is read from, as the config names it."""
    url = source.api_url if isinstance(source, GitHubSource) else source.base_url
    return url.rstrip("/")


def forge_api(kind: ForgeKind, environ: Mapping[str, str], configured: str = "") -> str:
    """The API a token of ``kind`` is sent to: ``configured`` (a source's), else the
    orchestrator's override, else the public host."""
    return (configured or environ.get(API_URL_ENV[kind], "") or PUBLIC_API[kind]).rstrip("/")


Named = Literal["config", "override", "default"]


@dataclass(frozen=True)
class ForgeLocation:
    """Where a forge of ``kind`` is (``url``, no trailing slash) and what said so:
    ``config`` (a source's ``api_url``/``base_url``), ``override`` (the orchestrator's
    ``ORCHESTRATOR_*`` variable) or ``default`` (the public host); ``named_by`` says it
    in words, for ``doctor``'s line."""

    kind: ForgeKind
    url: str
    named: Named
    named_by: str


def source_location(source: GitHubSource | GitLabSource) -> ForgeLocation:
    """Where a forge source reads its issues and writes its comments: its own URL (the
    key's default, the public host, when it names none)."""
    kind: ForgeKind = "github" if isinstance(source, GitHubSource) else "gitlab"
    key = "api_url" if kind == "github" else "base_url"
    if key in source.model_fields_set:
        return ForgeLocation(kind, source_api(source), "config",
                             f"source {source.source_id}'s {key}")  # fmt: skip
    return ForgeLocation(kind, source_api(source), "default",
                         f"the public host: source {source.source_id} names no {key}")  # fmt: skip


class ForgeStage(Protocol):
    """What of a stage's config says where its forge is (``config.StageConfig``)."""

    @property
    def name(self) -> str: ...
    @property
    def command(self) -> tuple[str, ...] | None: ...
    @property
    def forge_url(self) -> str | None: ...


# The stage modules that open requests on one forge, which a stage's ``forge_url`` names.
STAGE_MODULES: Final[Mapping[str, ForgeKind]] = {
    "orchestrator.stages.open_pr_github": "github",
    "orchestrator.stages.open_pr_gitlab": "gitlab",
}


def forge_location(
    kind: ForgeKind,
    sources: Sequence[Source],
    environ: Mapping[str, str],
    stages: Sequence[ForgeStage] = (),
) -> ForgeLocation:
    """Where the forge of ``kind`` is for this config and environment: the ``forge_url``
    of a stage that runs that forge's open-pr module, else the first ``[[sources]]`` of
    that kind (its URL, as ``source_location`` says), else the orchestrator's override,
    else the public host. Pure: the one answer preflight, the open-pr stage's environment
    and its egress allow-list all take."""
    for stage in stages:
        runs = [STAGE_MODULES[word] for word in stage.command or () if word in STAGE_MODULES]
        if stage.forge_url and kind in runs:
            return ForgeLocation(kind, stage.forge_url.rstrip("/"), "config",
                                 f"stage {stage.name}'s forge_url")  # fmt: skip
    for source in sources:
        if isinstance(source, GitHubSource | GitLabSource) and source.kind == kind:
            return source_location(source)
    override = environ.get(API_URL_ENV[kind], "").strip()
    if override:
        return ForgeLocation(kind, override.rstrip("/"), "override", f"${API_URL_ENV[kind]}")
    return ForgeLocation(kind, PUBLIC_API[kind], "default", "the public host")


def push_host(repository: str) -> str | None:
    """The network host a push to ``repository`` reaches (``https://host/…``,
    ``ssh://host/…``, ``user@host:path``), or None for a local path or ``file://``: no
    credential is asked for there."""
    if "://" in repository:
        parts = urlsplit(repository)
        return None if parts.scheme == "file" else (parts.hostname or "").lower()
    head, colon, _ = repository.partition(":")
    if colon and "/" not in head and len(head) > 1:  # scp-like; "C:" is not a host
        return head.rpartition("@")[2].lower()
    return None


def _hosts_of(api: str) -> set[str]:
    """Where a forge whose API is ``api`` takes pushes: its host, and GitHub's public web
    host beside its API host (``api.github.com`` → ``github.com``)."""
    host = (urlsplit(api).hostname or "").lower()
    return {host, host.removeprefix("api.")}


def origin_problem(
    ticket: Ticket, sources: Sequence[Source], environ: Mapping[str, str]
) -> str | None:
    """Why the forge named by ``ticket``'s ``[origin]`` is not one the operator named, or
    None. The open-pr stage sends the token to the origin's API and pushes to the
    ticket's repository: so for an origin of a configured source, both must be that
    source's; for any other origin, the API must be the forge's own (``forge_location``:
    the one its egress allows) and a push that leaves this machine must go there."""
    origin = ticket.fields.origin
    if origin is None:
        return None
    refused = "refused: a ticket never chooses where a forge token is sent"
    named = origin.api_url or PUBLIC_API[origin.kind]
    source = next(
        (s for s in sources if s.source_id == origin.source and s.kind == origin.kind), None
    )
    if isinstance(source, GitHubSource | GitLabSource):
        configured = source_api(source)
        if not same_api(named, configured):
            return (
                f"ticket {ticket.id}: its [origin] names {named} as the API of source "
                f"{origin.source!r}, whose API in the config is {configured}; {refused}"
            )
        if ticket.fields.repository != source.clone_url:
            return (
                f"ticket {ticket.id}: its repository {ticket.fields.repository!r} is not "
                f"source {origin.source!r}'s ({source.clone_url!r}), where its branch would "
                f"be pushed with the token; {refused}"
            )
        return None
    own = forge_location(origin.kind, sources, environ).url  # where the stage may reach
    if not same_api(named, own):
        return (
            f"ticket {ticket.id}: its [origin] names {named} as the {origin.kind} API, not "
            f"one the config names (no {origin.kind} source {origin.source!r}; the forge's "
            f"API here is {own}); {refused}"
        )
    host = push_host(ticket.fields.repository)
    if host is not None and host not in _hosts_of(own):
        return (
            f"ticket {ticket.id}: its repository {ticket.fields.repository!r} is on {host}, "
            f"not on the {origin.kind} forge at {own}; {refused}"
        )
    return None
