"""Which hosts a sandboxed stage may reach (issue 40, item 4): an allow-list, checked
outside the sandbox by the egress proxy (``execution/egress_proxy.py``), never a list of
what to block.

An entry of ``egress = [...]`` is one of:

    api.example.com           that host, on ports 443 and 80
    api.example.com:8443      that host, on that port only
    *.example.com             any name below example.com (not example.com itself), 443 and 80
    *.example.com:8443        the same, on that port
    127.0.0.1:8080, [::1]:80  an address, as written (no name resolves to it)
    *                         the whole network: the opt-out, warned at every start

Each engine kind reaches its provider's API host by default (``ENGINE_HOSTS``); a stage
(``[[stages]] egress``) and an engine (``[engines.X] egress``) add to that. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated

from pydantic import AfterValidator, Field

from orchestrator.domain.validation import StrictStr

OPEN = "*"
# A name without a port reaches these: HTTPS, and plain HTTP (a redirect to HTTPS).
DEFAULT_PORTS = (443, 80)
# Each engine kind's provider: what it reaches without any ``egress`` of its own.
ENGINE_HOSTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "claude-code": ("api.anthropic.com",),
        "codex": ("api.openai.com", "chatgpt.com"),
        "aider": ("api.anthropic.com", "api.openai.com"),
        "command": (),
        "patch": (),
    }
)

_LABEL = r"(?!-)[a-z0-9_-]{1,63}(?<!-)"
_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_MAX_NAME = 253


def parse_host(text: str) -> str | None:
    """``text`` as a host the proxy may be asked for (lower case, no trailing dot, an
    IPv6 address without brackets), or None when it is not a host name or address."""
    if text.startswith("[") and text.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(text[1:-1]))
        except ValueError:
            return None
    host = text.lower().removesuffix(".")
    if not host or len(host) > _MAX_NAME:
        return None
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    return host if _NAME.match(host) else None


def split_host_port(text: str, default: int | None) -> tuple[str, int | None] | None:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` → (host, port); the port is
    ``default`` when none is written. None when it is neither."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return None
        host_part, rest = text[: close + 1], text[close + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host_part, port_text = text.split(":")
    elif ":" in text:
        return None  # a bare IPv6 address is ambiguous with a port: brackets, please
    else:
        host_part, port_text = text, None
    port = default
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return None
        port = int(port_text)
    host = parse_host(host_part)
    return None if host is None else (host, port)


@dataclass(frozen=True)
class HostRule:
    """One allowed destination: a host (or, with ``wildcard``, any name below it) on
    ``ports`` (empty: the default ports)."""

    host: str
    wildcard: bool = False
    port: int | None = None

    def allows(self, host: str, port: int) -> bool:
        if port not in ((self.port,) if self.port is not None else DEFAULT_PORTS):
            return False
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host

    def __str__(self) -> str:
        name = f"*.{self.host}" if self.wildcard else self.host
        if ":" in name:
            name = f"[{name}]"
        return name if self.port is None else f"{name}:{self.port}"


def parse_rule(entry: str) -> HostRule:
    """One ``egress`` entry (not ``*``) as a rule; ValueError saying what is wrong."""
    wildcard = entry.startswith("*.")
    parsed = split_host_port(entry[2:] if wildcard else entry, None)
    if parsed is None or (wildcard and _is_address(parsed[0])):
        raise ValueError(
            f"egress entry {entry!r} is not a host: write 'host', 'host:port', "
            "'*.domain' or '*' (the whole network)"
        )
    return HostRule(parsed[0], wildcard, parsed[1])


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _valid_entries(entries: tuple[str, ...]) -> tuple[str, ...]:
    for entry in entries:
        if entry != OPEN:
            parse_rule(entry)
    return entries


# ``egress = [...]`` as config gives it: each entry checked at load.
EgressEntries = Annotated[
    tuple[Annotated[StrictStr, Field(min_length=1, max_length=260)], ...],
    Field(max_length=64),
    AfterValidator(_valid_entries),
]


@dataclass(frozen=True)
class EgressPolicy:
    """Where a sandboxed process may connect through the proxy. ``open``: anywhere (the
    opt-out: no proxy, the host's whole network)."""

    rules: tuple[HostRule, ...] = ()
    open: bool = False

    def allows(self, host: str, port: int) -> bool:
        return self.open or any(rule.allows(host, port) for rule in self.rules)

    def describe(self) -> str:
        if self.open:
            return "the whole network"
        return ", ".join(str(rule) for rule in self.rules) or "no host"


def egress_policy(*lists: Iterable[str]) -> EgressPolicy:
    """The policy of the entries of ``lists`` together (an engine kind's hosts, the
    engine's, the stage's, what the orchestrator derives); ``*`` anywhere opens it."""
    entries = [entry for entries in lists for entry in entries]
    if OPEN in entries:
        return EgressPolicy(open=True)
    return EgressPolicy(rules=tuple(dict.fromkeys(parse_rule(entry) for entry in entries)))


def host_of_url(url: str) -> str | None:
    """The ``host[:port]`` entry a URL's server is reached by, for hosts the orchestrator
    derives (a clone's repository); None for what is not an http(s) URL (a path, an
    ``ssh``/``git@`` address: those do not go through an HTTP proxy)."""
    match = re.match(r"^(https?)://(?:[^@/?#]*@)?([^/?#]+)", url, re.IGNORECASE)
    if match is None:
        return None
    scheme, authority = match.group(1).lower(), match.group(2)
    parsed = split_host_port(authority, 443 if scheme == "https" else 80)
    if parsed is None:
        return None
    host, port = parsed
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}"


@dataclass(frozen=True)
class NetworkAccess:
    """What a sandboxed stage reaches: ``none`` (no network at all), ``proxy`` (only
    ``policy``'s hosts, through the egress proxy) or ``open`` (the host's whole network:
    ``egress = ["*"]``, warned at every start and recorded)."""

    mode: str
    policy: EgressPolicy | None = None


NO_NETWORK = NetworkAccess("none")


def network_access(
    network: bool | None, *, engine: bool, declared: Iterable[str], implied: Iterable[str] = ()
) -> NetworkAccess:
    """A stage's, engine's or check's access: ``network`` as configured (unset: an engine
    has it, as does whatever declares hosts of its own), its ``declared`` egress and the
    hosts ``implied`` by what it is (an engine kind's provider, a clone's repository)."""
    declared = tuple(declared)
    wanted = network if network is not None else (engine or bool(declared))
    if not wanted:
        return NO_NETWORK
    policy = egress_policy(implied, declared)
    return NetworkAccess("open") if policy.open else NetworkAccess("proxy", policy)
