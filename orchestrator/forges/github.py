"""GitHub as a forge: open (or find) the pull request for a pushed branch, over REST.

Requests (GitHub REST API, version 2022-11-28, "Pulls": https://docs.github.com/rest/pulls):

    GET  /repos/{owner}/{name}/pulls?head={owner}:{branch}&base={base}&state=open
         → [] or [{"number": 7, "html_url": "https://github.com/o/n/pull/7", …}]
    POST /repos/{owner}/{name}/pulls   {"title", "head", "base", "body"}
         → 201 {"number", "html_url", …}; 422 {"message": "Validation Failed",
           "errors": [{"resource": "PullRequest", "code": "custom",
                       "message": "A pull request already exists for o:branch."}]}
    GET  /repos/{owner}/{name}/issues/{n}/comments?per_page=100&page=P
         → [{"id", "body", "user": {"login", "type"}, "created_at", "updated_at",
             "html_url"}, …]; ``type`` is "User" for a person, "Bot" for an app's account
    POST /repos/{owner}/{name}/issues/{n}/comments {"body"} → 201 {"id", …}
    PATCH /repos/{owner}/{name}/issues/comments/{id} {"body"} → 200
    GET  /repos/{owner}/{name}/issues/{n}/labels → [{"name", …}, …]
    POST /repos/{owner}/{name}/issues/{n}/labels {"labels": [name]} → 200 (added; a label
         the repository lacks is made)
    DELETE /repos/{owner}/{name}/issues/{n}/labels/{name} → 200; 404 when it is not there
    GET  /user → {"login", …}: whose token this is
    GET  /repos/{owner}/{name}/collaborators/{login}/permission
         → {"permission": "admin"|"maintain"|"write"|"triage"|"read"|"none", …}; 404: no
           such account

Every request carries ``Authorization: Bearer <token>``, ``Accept:
application/vnd.github+json`` and ``X-GitHub-Api-Version: 2022-11-28``. Opening is
idempotent: an open pull request for the same head and base is reused (``created=False``),
and a POST that loses a race ("already exists") is answered by listing again.

The token lives only in request headers: never in a message, an exception, a repr or a
log. The HTTP client is injected (``httpx2.Client`` in the stage, a ``MockTransport`` one
in tests); this module does not import it, and the client's transport errors are named by
the caller (``network_errors``) and translated here into ``ForgeError(kind="outage")``.

    ForgeError(kind)   auth       401: the token is missing, wrong or expired
                       forbidden  403: the token may not do this (its words say so)
                       not_found  404: no such repository, or the token cannot see it
                       rejected   422 and other 4xx: GitHub refused the request, its words
                       rate_limited 429, or a 403 with ``Retry-After``, a remaining count
                                  of 0 or words of a (secondary) rate limit, still after
                                  waiting as long as one request may (``retry_at``: when)
                       outage     5xx, or the network failed

Every request waits out a rate limit (``Retry-After``, ``x-ratelimit-reset``) through the
injected ``sleep`` within ``max_wait_s`` (``_rest.send_with_backoff``); a GET, PATCH or
DELETE is sent again after a 5xx or a dropped connection, a POST never (a second comment,
a second pull request): opening looks for the request again instead (``base.open_or_reuse``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Unpack
from urllib.parse import quote, urlsplit

from orchestrator.domain.inert import markdown_block, markdown_inline
from orchestrator.forges._rest import (
    HttpClient,
    HttpResponse,
    RestForge,
    Retrying,
    json_fields,
    without_userinfo,
)
from orchestrator.forges.base import ForgeError, PullRequest, Refusal
from orchestrator.forges.issues import Comment

__all__ = [
    "GitHubForge",
    "HttpClient",
    "HttpResponse",
    "pr_body",
    "repo_from_url",
]

API_VERSION = "2022-11-28"
MEDIA_TYPE = "application/vnd.github+json"
DEFAULT_API_URL = "https://api.github.com"
# GitHub refuses bodies over 65536 characters; leave room for the footer.
MAX_BODY_CHARS = 60_000
PER_PAGE = 100
MAX_PAGES = 50  # 5000 comments on one issue: past that, something is wrong

_NAME = r"[A-Za-z0-9_.-]+"
_REPO = re.compile(rf"^(?P<owner>{_NAME})/(?P<name>{_NAME})$")
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")


def _url_patterns(host: str) -> tuple[re.Pattern[str], ...]:
    """The remote URLs of a repository on the GitHub at ``host`` (github.com, or a
    GitHub Enterprise host): https, ssh and scp-like."""
    at = re.escape(host)
    return (
        re.compile(
            rf"^https?://(?:[^@/]+@)?{at}/(?P<owner>{_NAME})/(?P<name>{_NAME}?)(?:\.git)?/?$",
            re.IGNORECASE,
        ),
        re.compile(
            rf"^ssh://git@{at}(?::22)?/(?P<owner>{_NAME})/(?P<name>{_NAME}?)(?:\.git)?/?$",
            re.IGNORECASE,
        ),
        re.compile(rf"^git@{at}:(?P<owner>{_NAME})/(?P<name>{_NAME}?)(?:\.git)?/?$", re.IGNORECASE),
    )


def web_url(api_url: str) -> str:
    """The web (and git) address of the GitHub whose API is ``api_url``:
    ``https://api.github.com`` → ``https://github.com``; GitHub Enterprise's
    ``https://HOST/api/v3`` → ``https://HOST``."""
    parts = urlsplit(api_url.strip())
    host = parts.netloc
    if host.lower() == "api.github.com":
        host = "github.com"
    return f"{parts.scheme or 'https'}://{host}"


def request_headers(token: str) -> dict[str, str]:
    """The headers every request carries (the token is in them, and nowhere else)."""
    return {
        "Authorization": f"Bearer {token}",
        "Accept": MEDIA_TYPE,
        "X-GitHub-Api-Version": API_VERSION,
    }


def repo_from_url(url: str, host: str = "github.com") -> str:
    """``owner/name`` from a remote URL (https, ssh, scp-like) of a repository on the
    GitHub at ``host`` (github.com unless a GitHub Enterprise host is named); ValueError
    otherwise."""
    for pattern in _url_patterns(host):
        match = pattern.match(url.strip())
        if match and match.group("name").removesuffix(".git") not in ("", ".", ".."):
            return f"{match.group('owner')}/{match.group('name')}"
    raise ValueError(f"not a GitHub repository URL: {without_userinfo(url)!r}")


def pr_body(ticket_body: str, verdict_summaries: Sequence[str], run_id: str) -> str:
    """The pull request's description: the ticket, then what the run decided on the way.
    Both were written by others (an issue's author, a model), so both are quoted as code,
    nothing in them live (``domain/inert.py``): only the line the stage adds after this
    may close an issue."""
    decisions = (
        "\n".join(f"- {markdown_inline(summary)}" for summary in verdict_summaries)
        if verdict_summaries
        else "No failure needed a recovery decision."
    )
    footer = (
        f"\n\n---\nOpened by the orchestrator, run `{run_id.replace('`', '')}`.\n\n"
        f"Recovery decisions in this run:\n{decisions}\n"
    )
    body = ticket_body.strip("\n")
    cut_note = "\n\n[… the ticket's text is cut here, at GitHub's limit]"
    # The fences around the text, at their longest: cutting the text cannot lengthen them.
    lead = "The ticket, as written:\n\n"
    room = MAX_BODY_CHARS - len(lead) - len(footer) - len(markdown_block(body)) + len(body)
    if len(body) > room:
        body = body[: max(room - len(cut_note), 0)] + cut_note
    return lead + markdown_block(body) + footer


def _github_message(response: HttpResponse) -> str:
    """GitHub's ``message`` and each ``errors[].message`` (or code), joined; '' if none."""
    data = json_fields(response)
    parts = []
    if isinstance(data.get("message"), str):
        parts.append(data["message"])
    errors = data.get("errors")
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, dict):
            detail = error.get("message") or " ".join(
                str(error[key]) for key in ("resource", "field", "code") if key in error
            )
            if detail:
                parts.append(str(detail))
        elif isinstance(error, str):
            parts.append(error)
    return "; ".join(parts)[:500]


class GitHubForge(RestForge):
    """Pull requests on one repository, with one token."""

    __slots__ = ("owner", "repo")
    FORGE = "GitHub"
    TOKEN_ENV = "GITHUB_TOKEN"
    LOGIN = "login"
    _api = ""  # paths are the client's, whose base URL is the API's root

    def __init__(
        self,
        client: HttpClient,
        repo: str,
        token: str,
        **retrying: Unpack[Retrying],
    ) -> None:
        match = _REPO.match(repo)
        if match is None:
            raise ValueError(f"repository must be 'owner/name' (got {repo!r})")
        super().__init__(
            client,
            token,
            subject=repo,
            headers=request_headers,
            message=_github_message,
            **retrying,
        )
        self.repo = repo
        self.owner = match.group("owner")

    def __repr__(self) -> str:
        return f"GitHubForge(repo={self.repo!r})"

    def _forbidden_hint(self, response: HttpResponse) -> str:
        if response.headers.get("x-ratelimit-remaining") != "0":
            return ""
        reset = response.headers.get("x-ratelimit-reset", "")
        return "; the API rate limit is spent" + (
            f" (resets at epoch {reset})" if reset.isdigit() else ""
        )

    def _create(self, head: str, base: str, title: str, body: str) -> PullRequest | Refusal:
        response = self._send(
            "POST",
            self._pulls_path(),
            json={"title": title, "head": head, "base": base, "body": body},
        )
        if response.status_code == 201:
            return _pull_request_from(self._object(response, "the new pull request"), created=True)
        error = self._error(response, f"cannot open a pull request for {head} into {base}")
        raced = response.status_code == 422 and "already exists" in _github_message(response)
        return Refusal(error, lost_race=raced)

    def _pulls_path(self) -> str:
        return self._repo_path("pulls")

    def _repo_path(self, tail: str) -> str:
        owner, name = self.repo.split("/")
        return f"/repos/{quote(owner, safe='')}/{quote(name, safe='')}/{tail}"

    # --- issue comments ------------------------------------------------------------------

    def issue_comments(self, number: int, *, _per_page: int = PER_PAGE) -> list[Comment]:
        """Every comment on issue ``number`` (all pages), oldest first."""
        doing = f"cannot list the comments of issue #{number}"
        comments: list[Comment] = []
        # Pages by number, not by ``Link``: the client may hold a relative base URL, and a
        # short page is the last one.
        for page in range(1, MAX_PAGES + 1):
            params = {"per_page": str(_per_page), "page": str(page)}
            response = self._send("GET", self._repo_path(f"issues/{number}/comments"),
                                  params=params)  # fmt: skip
            items = self._listed(response, doing)
            comments.extend(_comment(item) for item in items)
            if len(items) < _per_page:
                return comments
        raise ForgeError("outage", f"{doing}: more than {MAX_PAGES} pages")

    def create_comment(self, number: int, body: str) -> int:
        """Add a comment to issue ``number``; its id (to edit it in place later)."""
        path = self._repo_path(f"issues/{number}/comments")
        response = self._send("POST", path, json={"body": body})
        if response.status_code != 201:
            raise self._error(response, f"cannot comment on issue #{number}")
        return _comment(self._object(response, "the new comment")).id

    def edit_comment(self, number: int, comment_id: int, body: str) -> None:
        """Replace the text of comment ``comment_id`` (on issue ``number``, named in errors
        only: GitHub addresses a comment by its id alone)."""
        path = self._repo_path(f"issues/comments/{comment_id}")
        response = self._send("PATCH", path, json={"body": body})
        if response.status_code != 200:
            raise self._error(response, f"cannot edit comment {comment_id} on issue #{number}")

    # --- issue labels --------------------------------------------------------------------

    def issue_labels(self, number: int) -> list[str]:
        """The names of the labels on issue ``number`` (GitHub allows 100 at most)."""
        path = self._repo_path(f"issues/{number}/labels")
        response = self._send("GET", path, params={"per_page": str(PER_PAGE)})
        items = self._listed(response, f"cannot list the labels of issue #{number}")
        return [str(item["name"]) for item in items if isinstance(item.get("name"), str)]

    def relabel(self, number: int, add: str | None, remove: Sequence[str]) -> None:
        """Put label ``add`` on issue ``number`` and take ``remove`` off it, touching no
        other label: only what is missing is added, only what is there is removed."""
        present = set(self.issue_labels(number))
        if add is not None and add not in present:
            path = self._repo_path(f"issues/{number}/labels")
            response = self._send("POST", path, json={"labels": [add]})
            if response.status_code != 200:
                raise self._error(response, f"cannot label issue #{number} {add}")
        for name in remove:
            if name not in present or name == add:
                continue
            path = self._repo_path(f"issues/{number}/labels/{quote(name, safe='')}")
            response = self._send("DELETE", path)
            if response.status_code not in (200, 204, 404):  # 404: someone took it off first
                raise self._error(response, f"cannot take label {name} off issue #{number}")

    def permission(self, login: str) -> str | None:
        """``login``'s permission on the repository as GitHub says it now (``admin``,
        ``maintain``, ``write``, ``triage``, ``read`` or ``none``); None when there is no
        such account."""
        if not _LOGIN.match(login):
            return None  # not a login GitHub makes: nothing to ask about
        path = self._repo_path(f"collaborators/{quote(login, safe='')}/permission")
        response = self._send("GET", path)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._error(response, f"cannot read the permission of {login} on {self.repo}")
        permission = self._object(response, "the permission").get("permission")
        if not isinstance(permission, str):
            raise ForgeError("outage", "GitHub's permission answer has no permission")
        return permission

    def _find_open(self, head: str, base: str) -> PullRequest | None:
        response = self._send(
            "GET",
            self._pulls_path(),
            params={"head": f"{self.owner}:{head}", "base": base, "state": "open"},
        )
        for pull in self._listed(response, f"cannot list pull requests of {self.repo}"):
            return _pull_request_from(pull, created=False)
        return None


def _comment(data: Mapping[str, Any]) -> Comment:
    comment_id = data.get("id")
    if not isinstance(comment_id, int) or isinstance(comment_id, bool):
        raise ForgeError("outage", "GitHub's comment has no id")
    user = data.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return Comment(
        id=comment_id,
        body=str(data.get("body") or ""),
        author=login if isinstance(login, str) else "",
        created_at=str(data.get("created_at") or ""),
        updated_at=str(data.get("updated_at") or ""),
        url=str(data.get("html_url") or ""),
        author_person=_person(user),
    )


def _person(user: object) -> bool | None:
    kind = user.get("type") if isinstance(user, dict) else None
    return kind == "User" if isinstance(kind, str) else None


def _pull_request_from(data: Mapping[str, Any], *, created: bool) -> PullRequest:
    number, url = data.get("number"), data.get("html_url")
    if not isinstance(number, int) or not isinstance(url, str):
        raise ForgeError("outage", "GitHub's pull request has no number or html_url")
    return PullRequest(number=number, url=url, created=created)
