"""A loopback fake GitLab (REST API v4) for tests: one ``ThreadingHTTPServer`` on
127.0.0.1, answering in the real API's shapes for the endpoints the orchestrator uses —
merge requests, issues, notes (with their edit history), members' access levels, users
(``GET /users/:id`` says ``bot``: true for a username in ``bots``; a note's author is
shaped as GitLab's, without it) —
with GitLab's pagination (``Link`` and ``x-next-page``, ``per_page``), and failures on
demand: ``fail(status, times)`` answers the next requests with that status (429 with
``Retry-After`` and ``RateLimit-*``, 401, 403, 404, 500 …). Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import pytest

PROJECT = "grp/sub/cards"  # the project the tests' fake serves, nested groups and all
TOKEN = "glpat-FAKEtoken0123456789SECRET"


@dataclass
class Recorded:
    method: str
    path: str  # as sent, still URL-encoded
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeGitLab:
    """State of one GitLab: projects by path, and what it was asked."""

    token: str
    projects: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)  # username → id
    bots: set[str] = field(default_factory=set)  # usernames whose account is a bot
    requests: list[Recorded] = field(default_factory=list)
    failures: list[tuple[int, dict[str, str], Any]] = field(default_factory=list)
    # (method, path suffix, status, headers, body): answered to the next matching request.
    routed: list[tuple[str, str, int, dict[str, str], Any]] = field(default_factory=list)
    # Each write that succeeds is carried out, then answered with the next status here.
    acted_then_failed: list[int] = field(default_factory=list)
    default_per_page: int = 20
    base_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_project(self, path: str) -> dict[str, Any]:
        project = {"merge_requests": [], "issues": [], "members": {}, "next_note": 1}
        self.projects[path] = project
        return project

    def add_issue(self, path: str, title: str, labels: list[str], created_at: str,
                  author: str = "ann", description: str = "", state: str = "opened",
                  assignees: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
        project = self.projects[path]
        iid = len(project["issues"]) + 1
        issue = {
            "id": 1000 + iid, "iid": iid, "title": title, "description": description,
            "labels": labels, "state": state, "created_at": created_at,
            "web_url": f"{self.base_url}/{path}/-/issues/{iid}",
            "author": {"username": author}, "assignees": [{"username": a} for a in assignees],
            "notes": [],
        }  # fmt: skip
        project["issues"].append(issue)
        return issue

    def add_note(self, path: str, iid: int, body: str, author: str, created_at: str,
                 *, system: bool = False) -> dict[str, Any]:  # fmt: skip
        """A note on issue ``iid`` by ``author`` at ``created_at`` (ISO-8601)."""
        project = self.projects[path]
        issue = next(i for i in project["issues"] if i["iid"] == iid)
        note = {"id": project["next_note"], "body": body, "system": system,
                "author": {"id": self.users.get(author, 0), "username": author,
                           "name": author.title(), "state": "active"},
                "created_at": created_at, "updated_at": created_at, "history": []}  # fmt: skip
        project["next_note"] += 1
        issue["notes"].append(note)
        return note

    def fail(self, status: int, times: int = 1, headers: dict[str, str] | None = None,
             body: Any = None) -> None:  # fmt: skip
        """Answer the next ``times`` requests with ``status`` (and these headers and body)."""
        answer = body if body is not None else {"message": f"{status} fake"}
        self.failures.extend([(status, headers or {}, answer)] * times)

    def on(self, method: str, path_suffix: str, status: int,
           headers: dict[str, str] | None = None, body: Any = None, times: int = 1) -> None:  # fmt: skip
        """Answer the next ``times`` ``method`` requests whose path ends with ``path_suffix``
        (``/merge_requests``, ``/notes``, ``/user``) with this, before anything else."""
        answer = body if body is not None else {"message": f"{status} fake"}
        self.routed.extend([(method, path_suffix, status, headers or {}, answer)] * times)

    def rate_limit(self, method: str, path_suffix: str, retry_after: str = "60",
                   reset: str = "", times: int = 1) -> None:  # fmt: skip
        """GitLab's rate limit as its Rack::Attack answers it: 429, ``Retry-After``, the
        ``RateLimit-*`` headers (``RateLimit-Reset`` an epoch) and "Retry later" as text."""
        headers = {"Retry-After": retry_after, "RateLimit-Limit": "600",
                   "RateLimit-Observed": "601", "RateLimit-Remaining": "0"}  # fmt: skip
        if reset:
            headers["RateLimit-Reset"] = reset
        if not retry_after:
            del headers["Retry-After"]
        self.on(method, path_suffix, 429, headers, b"Retry later\n", times)

    # --- the API -------------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, query: dict[str, str], body: Any,
               headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        with self.lock:
            self.requests.append(Recorded(method, raw_path, query, headers, body))
            if self.failures:
                return self.failures.pop(0)
            for index, (verb, suffix, status, extra, answer) in enumerate(self.routed):
                if verb == method and raw_path.endswith(suffix):
                    del self.routed[index]
                    return status, extra, answer
            if headers.get("private-token") != self.token:
                return 401, {}, {"message": "401 Unauthorized"}
            answer = self._route(method, raw_path, query, body)
            if method != "GET" and answer[0] < 300 and self.acted_then_failed:
                return self.acted_then_failed.pop(0), {}, {"message": "500 Internal Server Error"}
            return answer

    def _route(self, method: str, raw_path: str, query: dict[str, str],
               body: Any) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        if raw_path == "/api/v4/user":
            return 200, {}, {"id": 1, "username": "bot"}
        if raw_path == "/api/v4/users":
            name = query.get("username", "")
            found = [{"id": self.users[name], "username": name}] if name in self.users else []
            return 200, {}, found
        if m := re.fullmatch(r"/api/v4/users/(\d+)", raw_path):
            named = [name for name, uid in self.users.items() if uid == int(m.group(1))]
            if not named:
                return 404, {}, {"message": "404 User Not Found"}
            return 200, {}, {"id": int(m.group(1)), "username": named[0],
                             "state": "active", "bot": named[0] in self.bots}  # fmt: skip
        match = re.fullmatch(r"/api/v4/projects/([^/]+)/(.*)", raw_path)
        if match is None or unquote(match.group(1)) not in self.projects:
            return 404, {}, {"message": "404 Project Not Found"}
        project = self.projects[unquote(match.group(1))]
        rest = match.group(2)
        if rest == "merge_requests":
            return self._merge_requests(project, unquote(match.group(1)), method, query, body)
        if rest == "issues" and method == "GET":
            issues = [i for i in project["issues"] if self._issue_matches(i, query)]
            issues.sort(key=lambda i: i["created_at"], reverse=query.get("sort") != "asc")
            return self._page(raw_path, query, [_public(i) for i in issues])
        if (m := re.fullmatch(r"issues/(\d+)", rest)) and method == "PUT":
            return self._edit_issue(project, int(m.group(1)), body)
        if m := re.fullmatch(r"issues/(\d+)/notes(?:/(\d+))?", rest):
            return self._notes(project, int(m.group(1)), m.group(2), method, raw_path, query, body)
        if m := re.fullmatch(r"members/all/(\d+)", rest):
            level = project["members"].get(int(m.group(1)))
            if level is None:
                return 404, {}, {"message": "404 Not found"}
            return 200, {}, {"id": int(m.group(1)), "access_level": level}
        return 404, {}, {"error": "404 Not Found"}

    def _merge_requests(self, project: dict[str, Any], path: str, method: str,
                        query: dict[str, str], body: Any) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        mrs = project["merge_requests"]
        if method == "GET":
            found = [mr for mr in mrs if all(mr[k] == query[k] for k in
                     ("source_branch", "target_branch", "state") if k in query)]  # fmt: skip
            return 200, {}, found
        if any(mr["source_branch"] == body["source_branch"] and mr["target_branch"] ==
               body["target_branch"] and mr["state"] == "opened" for mr in mrs):  # fmt: skip
            return 409, {}, {"message": ["Another open merge request already exists for "
                                         f"this source branch: !{mrs[-1]['iid']}"]}  # fmt: skip
        iid = len(mrs) + 1
        mr = {"id": 500 + iid, "iid": iid, "state": "opened",
              "web_url": f"{self.base_url}/{path}/-/merge_requests/{iid}",
              **{k: body[k] for k in ("source_branch", "target_branch", "title", "description")}}  # fmt: skip
        mrs.append(mr)
        return 201, {}, mr

    @staticmethod
    def _edit_issue(project: dict[str, Any], iid: int,
                    body: Any) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        """``add_labels`` / ``remove_labels`` (comma-separated), the issue's other labels kept."""
        issue = next((i for i in project["issues"] if i["iid"] == iid), None)
        if issue is None:
            return 404, {}, {"message": "404 Issue Not Found"}
        removed = {x for x in str(body.get("remove_labels", "")).split(",") if x}
        added = [x for x in str(body.get("add_labels", "")).split(",") if x]
        kept = [label for label in issue["labels"] if label not in removed]
        issue["labels"] = kept + [x for x in added if x not in kept]
        return 200, {}, _public(issue)

    @staticmethod
    def _issue_matches(issue: dict[str, Any], query: dict[str, str]) -> bool:
        wanted = [x for x in query.get("labels", "").split(",") if x]
        assignee = query.get("assignee_username")
        return (
            all(label in issue["labels"] for label in wanted)
            and (query.get("state") in (None, "all") or issue["state"] == query["state"])
            and (assignee is None or {"username": assignee} in issue["assignees"])
        )

    def _notes(self, project: dict[str, Any], iid: int, note_id: str | None, method: str,
               raw_path: str, query: dict[str, str], body: Any) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        issue = next((i for i in project["issues"] if i["iid"] == iid), None)
        if issue is None:
            return 404, {}, {"message": "404 Issue Not Found"}
        notes = issue["notes"]
        if method == "GET" and note_id is None:
            return self._page(raw_path, query, [_public(n) for n in notes])
        if method == "POST" and note_id is None:
            note = {"id": project["next_note"], "body": body["body"], "system": False,
                    "author": {"username": "bot"}, "history": []}  # fmt: skip
            project["next_note"] += 1
            notes.append(note)
            return 201, {}, _public(note)
        found = [n for n in notes if str(n["id"]) == note_id]
        if not found:
            return 404, {}, {"message": "404 Note Not Found"}
        note = found[0]
        if method == "PUT":
            note["history"].append(note["body"])
            note["body"] = body["body"]
            note["updated_at"] = note["last_edited_at"] = "2099-01-01T00:00:00.000Z"
            return 200, {}, _public(note)
        return 405, {}, {"message": "405 Method Not Allowed"}

    def _page(self, raw_path: str, query: dict[str, str],
              items: list[Any]) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        per_page = int(query.get("per_page", self.default_per_page))
        per_page = min(per_page, self.default_per_page)  # a small cap makes pages in tests
        page = int(query.get("page", "1"))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {"x-page": str(page), "x-per-page": str(per_page), "x-total": str(len(items)),
                   "x-next-page": ""}  # fmt: skip
        if page * per_page < len(items):
            headers["x-next-page"] = str(page + 1)
            next_query = urlencode({**query, "page": str(page + 1)})
            headers["link"] = f'<{self.base_url}{raw_path}?{next_query}>; rel="next"'
        return 200, headers, chunk


def _public(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("notes", "history")}


def _handler(gitlab: FakeGitLab) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, answer = gitlab.handle(
                self.command, parts.path, dict(parse_qsl(parts.query)), body, headers
            )
            raw = isinstance(answer, bytes)  # "Retry later", as Rack::Attack says it
            data = answer if raw else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "text/plain" if raw else "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: pytest shows what the test asserts instead

    return Handler


def serve(token: str, *projects: str) -> Iterator[FakeGitLab]:
    """Run a fake GitLab with ``projects`` on 127.0.0.1 for the duration of the generator
    (a fixture's body: ``yield from serve(TOKEN, "grp/cards")``)."""
    gitlab = FakeGitLab(token=token)
    for project in projects:
        gitlab.add_project(project)
    with (
        ThreadingHTTPServer(("127.0.0.1", 0), _handler(gitlab)) as server,
        ThreadPoolExecutor(max_workers=1) as pool,  # leaving it waits for the server loop
    ):
        gitlab.base_url = f"http://127.0.0.1:{server.server_address[1]}"
        # A short poll: shutdown() waits for it, and each test starts its own server.
        pool.submit(server.serve_forever, 0.02)
        try:
            yield gitlab
        finally:
            server.shutdown()


@pytest.fixture(name="gitlab")
def gitlab_server() -> Iterator[FakeGitLab]:
    """The fake serving ``PROJECT`` to ``TOKEN`` (import it into a test module to use it)."""
    yield from serve(TOKEN, PROJECT)
