"""A loopback fake of GitHub's REST issues API, shaped like the real one.

``GET /repos/{owner}/{name}/issues`` answers the configured issues (pull requests among
them, as GitHub lists them) filtered by ``state``, ``labels``, ``assignee``, sorted by
creation, ``per_page`` at a time with a ``Link`` header (``rel="next"``/``"last"``).
``answers`` queues canned answers (a 403 with the rate limit spent, a 429 with
``Retry-After``, a 404, a 500) served before the real ones; every request is recorded.

Collaborator permissions: ``GET /repos/{o}/{n}/collaborators/{login}/permission`` answers
``permissions[repo][login]`` (``"none"`` for anyone not listed).

Issue comments: ``GET``/``POST /repos/{o}/{n}/issues/{N}/comments`` (``per_page``,
``page``), ``PATCH /repos/{o}/{n}/issues/comments/{id}`` (each edit keeps the body it
replaced in the comment's ``history``), and ``GET /user`` (the token's account, ``LOGIN``).
``add_comment`` seeds a comment by any account (a forged one, say); its ``user`` is
shaped as GitHub's: ``login``, ``id`` and ``type`` ("Bot" for a ``…[bot]`` login, "User"
otherwise, unless ``account_type`` says another).

Issue labels: ``GET``/``POST /repos/{o}/{n}/issues/{N}/labels`` and ``DELETE
…/labels/{name}``, on the issue's ``labels``.

Rate limits and outages as GitHub answers them (issue 43), on the requests they are meant
for: ``on(method, path_suffix, status, headers, body, times)`` queues an answer for the
next matching requests only (``secondary_limit``: a 403 with ``Retry-After`` whose body
says "secondary rate limit", or the same as a 429; ``primary_limit``: a 403 with
``x-ratelimit-remaining: 0`` and the epoch of ``x-ratelimit-reset``; ``burst``: 5xx
answers, a 502 as GitHub's HTML page). Header values are sent as given, so a test can
feed a year, a negative number, an HTTP-date or garbage.

Pull requests: ``GET /repos/{o}/{n}/pulls`` (``head=owner:branch``, ``base``, ``state``)
and ``POST /repos/{o}/{n}/pulls`` (``title``, ``head``, ``base``, ``body``; 422 "A pull
request already exists" for a second open one on the same head and base), kept in
``pulls[repo]``. Pull requests and issues share their numbers, as on GitHub.
"""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOGIN = "orchestrator-bot"  # the account the fake's token belongs to


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any = None


@dataclass
class FakeGitHub:
    issues: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # repo → issues
    answers: list[tuple[int, dict[str, str], Any]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    per_page_cap: int = 100
    url: str = ""
    # repo → comments: {"id", "issue", "body", "user": {"login"}, …, "history": [bodies]}
    comments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    next_comment_id: int = 9001
    # repo → login → collaborator permission (admin, maintain, write, triage, read); an
    # existing account not listed reads "none" (GitHub's word for a public repo's stranger)
    permissions: dict[str, dict[str, str]] = field(default_factory=dict)
    # repo → pull requests: {"number", "title", "head": {"ref"}, "base": {"ref"}, "body", …}
    pulls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Failures after the fact: each write that succeeds is carried out, then answered with
    # the next status here (the server acted and said it failed); and the next ``drops``
    # requests are read and answered with nothing: the connection is closed.
    acted_then_failed: list[int] = field(default_factory=list)
    drops: int = 0
    # (method, path suffix, status, headers, body): answered to the next matching request.
    routed: list[tuple[str, str, int, dict[str, str], Any]] = field(default_factory=list)

    def add_issue(
        self,
        repo: str,
        number: int,
        title: str,
        body: str | None = "",
        labels: tuple[str, ...] = (),
        *,
        state: str = "open",
        assignees: tuple[str, ...] = (),
        pull_request: bool = False,
    ) -> dict[str, Any]:
        issue: dict[str, Any] = {
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "html_url": f"https://github.com/{repo}/issues/{number}",
            "user": {"login": "reporter"},
            "labels": [{"name": label} for label in labels],
            "assignees": [{"login": login} for login in assignees],
            "created_at": f"2026-01-01T00:00:{number % 60:02d}Z",
        }
        if pull_request:
            issue["pull_request"] = {"url": f"https://api.github.com/repos/{repo}/pulls/{number}"}
        self.issues.setdefault(repo, []).append(issue)
        return issue

    def add_comment(self, repo: str, number: int, body: str, login: str = LOGIN,
                    account_type: str | None = None) -> dict[str, Any]:  # fmt: skip
        """A comment on issue ``number`` of ``repo``, written by ``login``."""
        comment_id = self.next_comment_id
        self.next_comment_id += 1
        stamp = f"2026-01-02T00:00:{comment_id % 60:02d}Z"
        kind = account_type or ("Bot" if login.endswith("[bot]") else "User")
        user = {"login": login, "id": 100 + sum(map(ord, login)), "type": kind}
        comment = {
            "id": comment_id, "issue": number, "body": body, "user": user,
            "created_at": stamp, "updated_at": stamp, "history": [],
            "html_url": f"https://github.com/{repo}/issues/{number}#issuecomment-{comment_id}",
        }  # fmt: skip
        self.comments.setdefault(repo, []).append(comment)
        return comment

    def add_pull(self, repo: str, head: str, base: str, title: str, body: str) -> dict[str, Any]:
        """A pull request from branch ``head`` into ``base``, numbered after every issue
        and pull request of ``repo``."""
        taken = [i["number"] for i in self.issues.get(repo, [])]
        taken += [p["number"] for p in self.pulls.get(repo, [])]
        number = max(taken, default=0) + 1
        pull = {
            "number": number, "title": title, "body": body, "state": "open",
            "head": {"ref": head, "label": f"{repo.split('/')[0]}:{head}"},
            "base": {"ref": base},
            "html_url": f"https://github.com/{repo}/pull/{number}",
        }  # fmt: skip
        self.pulls.setdefault(repo, []).append(pull)
        return pull

    def comments_on(self, repo: str, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.get(repo, []) if c["issue"] == number]

    def answer(self, status: int, headers: dict[str, str] | None = None, body: Any = None) -> None:
        self.answers.append((status, headers or {}, body if body is not None else {}))

    def on(self, method: str, path_suffix: str, status: int,
           headers: dict[str, str] | None = None, body: Any = None, times: int = 1) -> None:  # fmt: skip
        """Answer the next ``times`` ``method`` requests whose path ends with ``path_suffix``
        (``/pulls``, ``/comments``, ``/user``) with this, before anything else."""
        answer = (method, path_suffix, status, headers or {}, body if body is not None else {})
        self.routed.extend([answer] * times)

    def secondary_limit(self, method: str, path_suffix: str, retry_after: str = "60",
                        times: int = 1, status: int = 403) -> None:  # fmt: skip
        """GitHub's secondary rate limit: 403 (or 429) with ``Retry-After``."""
        body = {"message": "You have exceeded a secondary rate limit. Please wait a few "
                "minutes before you try again. If you reach out to GitHub Support for help, "
                "please include the request ID 0000:1111:2222.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-"
                "the-rest-api#about-secondary-rate-limits", "status": str(status)}  # fmt: skip
        self.on(method, path_suffix, status, {"Retry-After": retry_after}, body, times)

    def primary_limit(self, method: str, path_suffix: str, reset: str, times: int = 1) -> None:
        """GitHub's primary rate limit spent: 403, remaining 0, the reset epoch."""
        headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0",
                   "x-ratelimit-used": "5000", "x-ratelimit-reset": reset,
                   "x-ratelimit-resource": "core"}  # fmt: skip
        body = {"message": "API rate limit exceeded for user ID 1. If you reach out to "
                "GitHub Support for help, please include the request ID 0000:1111:2222.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-"
                "the-rest-api", "status": "403"}  # fmt: skip
        self.on(method, path_suffix, 403, headers, body, times)

    def burst(self, method: str, path_suffix: str, times: int, status: int = 502) -> None:
        """``times`` failing answers: a 502 is GitHub's HTML page, a 500/503 its JSON."""
        body: Any = (b"<html><body><h1>502 Bad Gateway</h1></body></html>" if status == 502
                     else {"message": "Server Error"})  # fmt: skip
        self.on(method, path_suffix, status, {}, body, times)


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            split = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(split.query))
            length = int(self.headers.get("Content-Length") or 0)
            sent = json.loads(self.rfile.read(length)) if length else None
            fake.requests.append(
                Recorded(self.command, split.path, query, dict(self.headers.items()), sent)
            )
            if fake.drops:
                fake.drops -= 1
                self.close_connection = True
                return None  # no status line: the client sees the connection dropped
            if fake.answers:
                status, headers, body = fake.answers.pop(0)
                return self._send(status, body, headers)
            for index, (method, suffix, status, headers, body) in enumerate(fake.routed):
                if method == self.command and split.path.endswith(suffix):
                    del fake.routed[index]
                    return self._send(status, body, headers)
            if self.headers.get("Authorization") != "Bearer " + "ghp_" + "fake-token-123":
                return self._send(401, {"message": "Bad credentials"})
            parts = split.path.strip("/").split("/")
            if parts == ["user"] and self.command == "GET":
                return self._send(200, {"login": LOGIN, "id": 1})
            if len(parts) == 6 and parts[0] == "repos" and parts[3] == "collaborators" \
                    and parts[5] == "permission" and self.command == "GET":  # fmt: skip
                granted = fake.permissions.get(f"{parts[1]}/{parts[2]}", {}).get(parts[4])
                return self._send(200, {"permission": granted or "none",
                                        "user": {"login": parts[4]}})  # fmt: skip
            if len(parts) == 4 and parts[0] == "repos" and parts[3] == "pulls":
                return self._pulls(f"{parts[1]}/{parts[2]}", query, sent)
            if len(parts) in (6, 7) and parts[0] == "repos" and parts[3] == "issues" \
                    and parts[5] == "labels":  # fmt: skip
                return self._labels(f"{parts[1]}/{parts[2]}", parts[4], parts[6:], sent)
            if len(parts) >= 5 and parts[0] == "repos" and parts[3] == "issues":
                return self._comments(f"{parts[1]}/{parts[2]}", parts[4:], query, sent)
            if self.command != "GET":
                return self._send(404, {"message": "Not Found"})
            if len(parts) != 4 or parts[0] != "repos" or parts[3] != "issues":
                return self._send(404, {"message": "Not Found"})
            repo = f"{parts[1]}/{parts[2]}"
            if repo not in fake.issues:
                return self._send(404, {"message": "Not Found"})
            self._list(repo, query)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

        def _labels(self, repo: str, number: str, named: list[str], sent: Any) -> None:
            """An issue's labels: GET lists, POST adds (``{"labels": [...]}``), DELETE
            ``…/labels/{name}`` takes one off (404 when it is not on the issue)."""
            issue = next((i for i in fake.issues.get(repo, []) if str(i["number"]) == number),
                         None)  # fmt: skip
            if issue is None:
                return self._send(404, {"message": "Not Found"})
            labels = issue["labels"]
            if self.command == "POST" and not named:
                for name in sent["labels"]:
                    if name not in {label["name"] for label in labels}:
                        labels.append({"name": name})
            elif self.command == "DELETE" and named:
                name = urllib.parse.unquote(named[0])
                if name not in {label["name"] for label in labels}:
                    return self._send(404, {"message": "Label does not exist"})
                labels[:] = [label for label in labels if label["name"] != name]
            elif self.command != "GET" or named:
                return self._send(404, {"message": "Not Found"})
            self._send(200, [{"name": label["name"]} for label in labels])

        def _pulls(self, repo: str, query: dict[str, str], sent: Any) -> None:
            if repo not in fake.issues and repo not in fake.pulls:
                return self._send(404, {"message": "Not Found"})
            owner = repo.split("/")[0]

            def matches(pull: dict[str, Any], head: str, base: str) -> bool:
                return (
                    pull["state"] == "open"
                    and pull["head"]["ref"] == head
                    and (not base or pull["base"]["ref"] == base)
                )

            if self.command == "POST":
                head, base = sent["head"], sent["base"]
                if any(matches(p, head, base) for p in fake.pulls.get(repo, [])):
                    return self._send(422, {"message": "Validation Failed", "errors": [
                        {"message": f"A pull request already exists for {owner}:{head}."}]})  # fmt: skip
                pull = fake.add_pull(repo, head, base, sent["title"], sent.get("body") or "")
                return self._send(201, pull)
            if self.command != "GET":
                return self._send(404, {"message": "Not Found"})
            head_owner, _, head = query.get("head", ":").partition(":")
            rows = [
                p for p in fake.pulls.get(repo, [])
                if (not head or (head_owner == owner and p["head"]["ref"] == head))
                and matches(p, p["head"]["ref"], query.get("base", ""))
            ]  # fmt: skip
            self._send(200, rows[: min(int(query.get("per_page", "30")), fake.per_page_cap)])

        def _comments(self, repo: str, rest: list[str], query: dict[str, str], sent: Any) -> None:
            if rest[0] == "comments" and len(rest) == 2 and self.command == "PATCH":
                found = [c for c in fake.comments.get(repo, []) if str(c["id"]) == rest[1]]
                if not found:
                    return self._send(404, {"message": "Not Found"})
                found[0]["history"].append(found[0]["body"])
                found[0]["body"] = sent["body"]
                found[0]["updated_at"] = "2026-01-03T00:00:00Z"
                return self._send(200, _public(found[0]))
            if len(rest) != 2 or rest[1] != "comments" or not rest[0].isdigit():
                return self._send(404, {"message": "Not Found"})
            number = int(rest[0])
            if self.command == "POST":
                return self._send(201, _public(fake.add_comment(repo, number, sent["body"])))
            rows = [_public(c) for c in fake.comments_on(repo, number)]
            per_page = min(int(query.get("per_page", "30")), fake.per_page_cap)
            page = int(query.get("page", "1"))
            self._send(200, rows[(page - 1) * per_page : page * per_page])

        def _list(self, repo: str, query: dict[str, str]) -> None:
            state = query.get("state", "open")
            wanted = {label for label in query.get("labels", "").split(",") if label}
            assignee = query.get("assignee")
            rows = [
                issue
                for issue in fake.issues[repo]
                if (state == "all" or issue["state"] == state)
                and wanted <= {label["name"] for label in issue["labels"]}
                and (assignee is None or assignee in {a["login"] for a in issue["assignees"]})
            ]
            rows.sort(
                key=lambda issue: issue["created_at"], reverse=query.get("direction") != "asc"
            )
            per_page = min(int(query.get("per_page", "30")), fake.per_page_cap)
            page = int(query.get("page", "1"))
            last = max((len(rows) + per_page - 1) // per_page, 1)
            links = []
            host = f"http://{self.headers.get('Host')}"
            for rel, number in (("next", page + 1), ("last", last)):
                if number <= last and (rel != "next" or page < last):
                    params = dict(query, page=str(number))
                    target = f"{host}/repos/{repo}/issues?{urllib.parse.urlencode(params)}"
                    links.append(f'<{target}>; rel="{rel}"')
            headers = {"Link": ", ".join(links)} if links else {}
            headers["x-ratelimit-remaining"] = "4999"
            self._send(200, rows[(page - 1) * per_page : page * per_page], headers)

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            if self.command != "GET" and status < 300 and fake.acted_then_failed:
                status, body = fake.acted_then_failed.pop(0), {"message": "Server Error"}
            raw = isinstance(body, bytes)  # an HTML error page, as a proxy in front sends
            data = body if raw else json.dumps(body).encode()
            self.send_response(status)
            self.send_header(
                "Content-Type", "text/html" if raw else "application/json; charset=utf-8"
            )
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


TOKEN = "ghp_" + "fake-token-123"


def _public(comment: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in comment.items() if k not in ("issue", "history")}


@contextlib.contextmanager
def serve_github() -> Iterator[FakeGitHub]:
    """A running fake on 127.0.0.1 (a free port), stopped on leaving."""
    fake = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
