"""GitLab as a forge (gitlab.com or a self-managed host), over REST API v4: merge requests
for pushed branches, and the issues, notes and members the intake reads.

Requests (https://docs.gitlab.com/api/ — the project is named by its URL-encoded path,
``group%2Fsub%2Fname``):

    GET  /projects/:id/merge_requests?source_branch=&target_branch=&state=opened
    POST /projects/:id/merge_requests  {"source_branch", "target_branch", "title",
         "description"} → 201 {"iid", "web_url", …}; 409 {"message": ["Another open merge
         request already exists for this source branch: !7"]}
    GET  /projects/:id/issues?labels=&state=opened&order_by=created_at&sort=asc&per_page=
    GET  /projects/:id/issues/:iid/notes?sort=asc&order_by=created_at
    POST /projects/:id/issues/:iid/notes {"body"};  PUT …/notes/:note_id {"body"}
    PUT  /projects/:id/issues/:iid {"add_labels": "a,b", "remove_labels": "c"}: others kept
    GET  /users?username=   GET /projects/:id/members/all/:user_id → {"access_level": 30}
    GET  /users/:id → {"id", "username", "bot": false, …}: whether the account is a bot
         (a project or group access token's user, a service account, GitLab's own)
    GET  /user → {"username", …}: whose token this is

Every request carries ``PRIVATE-TOKEN: <token>`` and nothing else secret; the token is in
no message, exception or repr. Lists follow the ``Link`` header's ``rel="next"`` (GitLab
sends it beside ``x-next-page``), only on the origin they started from: the token goes with
every page. A 429 or a 5xx is waited out (``Retry-After``, else ``RateLimit-Reset``) with
bounded back-off through the injected ``sleep`` (``forges.http.send_with_backoff``), and so
is a dropped connection or a timeout on a GET or a PUT; a POST (a note, a merge request) is
sent again only after a 429: after a 5xx or a dropped connection GitLab may have made it.

    ForgeError(kind)   auth         401: the token is missing, wrong or expired
                       forbidden    403: the token may not do this
                       not_found    404: no such project (or issue), or the token cannot see it
                       rejected     400, 409, 422 and other 4xx: GitLab refused, its words
                       rate_limited 429 (or a 403 that says a rate limit), still after
                                    waiting as long as one request may (``retry_at``: when)
                       outage       5xx still after waiting, the network failed, or a next
                                    page on another host
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Unpack
from urllib.parse import quote, urlsplit

from orchestrator.forges._rest import (
    HttpClient,
    HttpResponse,
    RestForge,
    Retrying,
    json_body,
    json_fields,
    without_userinfo,
)
from orchestrator.forges.base import ForgeError, PullRequest, Refusal
from orchestrator.forges.http import PagingError, fetch_pages
from orchestrator.forges.issues import Comment, ForgeIssue

DEFAULT_URL = "https://gitlab.com"
PER_PAGE = 100

_SEGMENT = r"[A-Za-z0-9_.][A-Za-z0-9_.-]*"
_PROJECT = re.compile(rf"^{_SEGMENT}(?:/{_SEGMENT})+$")


def request_headers(token: str) -> dict[str, str]:
    """The headers every request carries (the token is in them, and nowhere else)."""
    return {"PRIVATE-TOKEN": token, "Accept": "application/json"}


def project_from_url(url: str) -> str:
    """``group/sub/name`` from a GitLab remote URL (https, ssh, scp-like; any host, nested
    groups); ValueError otherwise. The host is not checked: self-managed hosts are many."""
    text = url.strip()
    scp = re.match(r"^[\w.-]+@[\w.-]+:(?!//)(?P<path>.+)$", text)
    if scp:
        path = scp.group("path")
    else:
        parts = urlsplit(text)
        if parts.scheme not in ("https", "http", "ssh") or not parts.hostname:
            raise ValueError(f"not a GitLab project URL: {without_userinfo(text)!r}")
        path = parts.path
    project = path.strip("/").removesuffix(".git")
    if not _PROJECT.match(project) or "/-/" in f"/{project}/" or ".." in project.split("/"):
        raise ValueError(f"not a GitLab project URL: {without_userinfo(text)!r}")
    return project


def gitlab_message(response: HttpResponse) -> str:
    """GitLab's ``message`` (a string, a list, or a field → errors map) or ``error``."""
    data = json_fields(response)
    said = data.get("message", data.get("error", ""))
    if isinstance(said, list):
        said = "; ".join(str(part) for part in said)
    elif isinstance(said, dict):
        said = "; ".join(f"{field} {' '.join(map(str, errs)) if isinstance(errs, list) else errs}"
                         for field, errs in said.items())  # fmt: skip
    return str(said)[:500]


class GitLabForge(RestForge):
    """Merge requests, issues, notes and members of one project, with one token."""

    __slots__ = ("_api", "project")
    FORGE = "GitLab"
    TOKEN_ENV = "GITLAB_TOKEN"
    LOGIN = "username"

    def __init__(
        self,
        client: HttpClient,
        base_url: str,
        project: str,
        token: str,
        **retrying: Unpack[Retrying],
    ) -> None:
        if not _PROJECT.match(project):
            raise ValueError(f"project must be 'group/name' or 'group/sub/name' (got {project!r})")
        super().__init__(
            client,
            token,
            subject=project,
            headers=request_headers,
            message=gitlab_message,
            **retrying,
        )
        self._api = f"{base_url.rstrip('/')}/api/v4"
        self.project = project

    def __repr__(self) -> str:
        return f"GitLabForge(api={self._api!r}, project={self.project!r})"

    # --- merge requests ------------------------------------------------------------------

    def _create(self, head: str, base: str, title: str, body: str) -> PullRequest | Refusal:
        payload = {"source_branch": head, "target_branch": base, "title": title,
                   "description": body, "remove_source_branch": True}  # fmt: skip
        response = self._send("POST", self._path("merge_requests"), json=payload)
        if response.status_code != 201:
            doing = f"cannot open a merge request for {head} into {base}"
            return Refusal(self._error(response, doing), lost_race=_lost_race(response))
        return _merge_request(self._object(response, "the new merge request"), created=True)

    def _find_open(self, head: str, base: str) -> PullRequest | None:
        params = {"source_branch": head, "target_branch": base, "state": "opened"}
        for found in self._pages(
            "merge_requests", params, f"list merge requests of {self.project}"
        ):
            return _merge_request(found, created=False)
        return None

    # --- issues and notes ----------------------------------------------------------------

    def list_issues(self, label: str, assignee: str | None = None) -> list[ForgeIssue]:
        """Every opened issue with ``label`` (all pages), oldest first."""
        params = {"labels": label, "state": "opened", "order_by": "created_at", "sort": "asc",
                  "per_page": str(PER_PAGE)}  # fmt: skip
        if assignee is not None:
            params["assignee_username"] = assignee
        issues = [
            _issue(i) for i in self._pages("issues", params, f"list issues of {self.project}")
        ]
        return issues

    def issue_comments(self, iid: int) -> list[Comment]:
        """The notes on issue ``iid``, oldest first (GitLab's own system notes included)."""
        params = {"sort": "asc", "order_by": "created_at", "per_page": str(PER_PAGE)}
        doing = f"list the notes of issue #{iid}"
        page = f"{self._api.removesuffix('/api/v4')}/{self.project}/-/issues/{iid}"
        return [_note(n, page) for n in self._pages(f"issues/{iid}/notes", params, doing)]

    def create_comment(self, iid: int, body: str) -> int:
        """Add a note to issue ``iid``; its id (to edit it in place later)."""
        response = self._send("POST", self._path(f"issues/{iid}/notes"), json={"body": body})
        if response.status_code != 201:
            raise self._error(response, f"cannot comment on issue #{iid}")
        return _note(self._object(response, "the new note")).id

    def edit_comment(self, iid: int, note_id: int, body: str) -> None:
        """Replace the text of note ``note_id`` on issue ``iid`` (GitLab keeps its history)."""
        path = self._path(f"issues/{iid}/notes/{note_id}")
        response = self._send("PUT", path, json={"body": body})
        if response.status_code != 200:
            raise self._error(response, f"cannot edit note {note_id} on issue #{iid}")

    def relabel(self, iid: int, add: str | None, remove: Sequence[str]) -> None:
        """Put label ``add`` on issue ``iid`` and take ``remove`` off it in one request;
        GitLab leaves every other label as it is (and makes a label the project lacks)."""
        change: dict[str, str] = {}
        if add is not None:
            change["add_labels"] = add
        taken = [name for name in remove if name != add]
        if taken:
            change["remove_labels"] = ",".join(taken)
        if not change:
            return
        response = self._send("PUT", self._path(f"issues/{iid}"), json=change)
        if response.status_code != 200:
            raise self._error(response, f"cannot relabel issue #{iid}")

    # --- permissions ---------------------------------------------------------------------

    def access_level(self, user: str | int) -> int | None:
        """The project access level of ``user`` (a username or a numeric id), inherited
        from groups included; None when they are no member (or no such user)."""
        user_id = user if isinstance(user, int) else self._user_id(user)
        if user_id is None:
            return None
        response = self._send("GET", self._path(f"members/all/{user_id}"))
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._error(response, f"cannot read the access level of user {user}")
        level = self._object(response, "the member").get("access_level")
        if not isinstance(level, int):
            raise ForgeError("outage", "GitLab's member has no access_level")
        return level

    def user_is_bot(self, user: str | int) -> bool | None:
        """Whether GitLab says the account ``user`` (a username or a numeric id) is a bot
        (``GET /users/:id``, its ``bot``); None when there is no such user or GitLab does
        not say."""
        user_id = user if isinstance(user, int) else self._user_id(user)
        if user_id is None:
            return None
        response = self._send("GET", f"{self._api}/users/{user_id}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._error(response, f"cannot read the account of user {user}")
        bot = self._object(response, "the user").get("bot")
        return bot if isinstance(bot, bool) else None

    def _user_id(self, username: str) -> int | None:
        response = self._send("GET", f"{self._api}/users", params={"username": username})
        if response.status_code != 200:
            raise self._error(response, f"cannot look up user {username}")
        users = json_body(response, "GitLab")
        for found in users if isinstance(users, list) else []:
            if isinstance(found, dict) and isinstance(found.get("id"), int):
                return int(found["id"])
        return None

    # --- the wire --------------------------------------------------------------------------

    def _path(self, tail: str) -> str:
        return f"{self._api}/projects/{quote(self.project, safe='')}/{tail}"

    def _pages(self, tail: str, params: Mapping[str, str], doing: str) -> Iterator[dict[str, Any]]:
        pages = fetch_pages(self._client, self._path(tail), params=params, headers=self._headers,
                            sleep=self._sleep, clock=self._clock, max_wait_s=self._max_wait_s,
                            network_errors=self._network_errors)  # fmt: skip
        try:
            for response in pages:
                yield from self._listed(response, f"cannot {doing}")
        except PagingError as exc:
            raise ForgeError("outage", f"cannot {doing}: {exc}") from None
        except self._network_errors as exc:
            raise self._unreachable(exc) from None


def _lost_race(response: HttpResponse) -> bool:
    """GitLab's 409 "Another open merge request already exists for this source branch: !7"."""
    return response.status_code == 409 and "already exists" in gitlab_message(response)


def _merge_request(data: Mapping[str, Any], *, created: bool) -> PullRequest:
    iid, url = data.get("iid"), data.get("web_url")
    if not isinstance(iid, int) or not isinstance(url, str):
        raise ForgeError("outage", "GitLab's merge request has no iid or web_url")
    return PullRequest(number=iid, url=url, created=created)


def _username(user: object) -> str:
    name = user.get("username") if isinstance(user, dict) else None
    return name if isinstance(name, str) else ""


def _issue(data: Mapping[str, Any]) -> ForgeIssue:
    iid = data.get("iid")
    if not isinstance(iid, int):
        raise ForgeError("outage", "GitLab's issue has no iid")
    labels = data.get("labels")
    assignees = data.get("assignees")
    return ForgeIssue(
        number=iid,
        title=str(data.get("title") or ""),
        body=str(data.get("description") or ""),
        labels=tuple(str(x) for x in labels) if isinstance(labels, list) else (),
        state="open" if data.get("state") == "opened" else str(data.get("state") or ""),
        url=str(data.get("web_url") or ""),
        author=_username(data.get("author")),
        assignees=tuple(_username(a) for a in assignees) if isinstance(assignees, list) else (),
    )


def _note(data: Mapping[str, Any], issue_page: str = "") -> Comment:
    note_id = data.get("id")
    if not isinstance(note_id, int):
        raise ForgeError("outage", "GitLab's note has no id")
    created = str(data.get("created_at") or "")
    author = data.get("author")
    bot = author.get("bot") if isinstance(author, dict) else None
    return Comment(
        id=note_id,
        body=str(data.get("body") or ""),
        author=_username(author),
        system=bool(data.get("system")),
        created_at=created,
        updated_at=str(data.get("last_edited_at") or data.get("updated_at") or created),
        url=f"{issue_page}#note_{note_id}" if issue_page else "",
        author_person=not bot if isinstance(bot, bool) else None,
    )
