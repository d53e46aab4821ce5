"""Reading a report page the way a browser's parser would (the standard library's
``html.parser``): its elements, attributes, ids and text, and its links resolved."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]


@dataclass
class ParsedPage:
    elements: list[Element] = field(default_factory=list)
    text: list[str] = field(default_factory=list)  # every text node, decoded
    ids: set[str] = field(default_factory=set)

    @property
    def all_text(self) -> str:
        return "".join(self.text)

    def tags(self, name: str) -> list[Element]:
        return [e for e in self.elements if e.tag == name]

    def urls(self) -> list[tuple[str, str]]:
        """(tag, value) of every href and src."""
        return [
            (e.tag, value)
            for e in self.elements
            for key, value in e.attrs.items()
            if key in ("href", "src", "xlink:href", "action", "formaction")
        ]


class _Parser(HTMLParser):
    def __init__(self, page: ParsedPage) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.page.elements.append(Element(tag, values))
        if "id" in values:
            self.page.ids.add(values["id"])

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.page.text.append(data)


def parse(html_text: str) -> ParsedPage:
    page = ParsedPage()
    parser = _Parser(page)
    parser.feed(html_text)
    parser.close()
    return page


def resolve(page_path: Path, url: str) -> Path | None:
    """The file a relative link on ``page_path`` opens; None for an in-page fragment."""
    parts = urlsplit(url)
    assert not parts.scheme and not parts.netloc, f"not a relative link: {url!r}"
    if not parts.path:
        return None
    return (page_path.parent / unquote(parts.path)).resolve()


def check_links(page_path: Path, page: ParsedPage) -> list[Path]:
    """Every href/src is relative (no scheme, no //host) and opens an existing file, or
    is a fragment naming an element of the page. Returns the files linked."""
    files = []
    for tag, url in page.urls():
        assert not url.startswith("//"), (tag, url)
        assert "://" not in url, (tag, url)
        assert not url.lower().startswith(("javascript:", "data:", "http:", "https:")), url
        target = resolve(page_path, url)
        if target is None:
            assert url.startswith("#") and url[1:] in page.ids, f"dangling fragment {url!r}"
            continue
        assert target.is_file(), f"{tag} {url!r} → {target}: no such file"
        files.append(target)
    return files
