"""Egress for tenants: every connection made for a tenant leaves through this policy and this proxy.

Tenant code never shares the host's network. A hosted Environment's sandbox, and the native Harness
processes of a shared Runtime, each have a network namespace of their own that holds only loopback; the
way out is an HTTP(S) proxy (`EgressProxy`) reached through a Unix socket bound into the namespace and a
small forwarder to a loopback port inside (`HTTP_PROXY`/`HTTPS_PROXY`). The proxy resolves each
destination itself and connects to the very address it checked (no DNS-rebinding window: the
sandbox never resolves, and a second connection is checked again), so one `EgressPolicy` decides for
every connection, redirects included (a redirect is a new request through the proxy).

The policy refuses what is not the public internet: loopback, link-local (the cloud metadata service at
169.254.169.254 and fd00:ec2::254 among them), private, shared (CGNAT), unique-local, multicast,
reserved and documentation ranges, IPv4 addresses mapped or embedded in IPv6 (mapped, NAT64, 6to4), and
this host's own addresses. One operator setting widens it: `AGENTS_CORE_EGRESS_ALLOW`, comma-separated
CIDRs tenant-driven connections may also reach (empty by default). Package installs take a narrower
policy: only the package registries (`AGENTS_CORE_PACKAGE_REGISTRIES`, host names; PyPI and npm by
default), still under the address policy.

It carries HTTP (absolute-form requests) and anything tunnelled with CONNECT (HTTPS, WebSocket over TLS).
Raw TCP and UDP other than through the proxy have no route out of a namespace.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import pathlib
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Optional, Union

from .loopserver import LoopServer, pipe

log = logging.getLogger("runtime.egress")

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

ALLOW_VARIABLE = "AGENTS_CORE_EGRESS_ALLOW"
REGISTRIES_VARIABLE = "AGENTS_CORE_PACKAGE_REGISTRIES"
DEFAULT_REGISTRIES = ("pypi.org", "files.pythonhosted.org", "registry.npmjs.org")
HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT = 15.0
RESOLVE_TIMEOUT = 10.0

# Each refused range with the reason a refusal names. Order matters only for the reason shown.
_REFUSED: tuple[tuple[str, str], ...] = (
    ("127.0.0.0/8", "loopback"), ("::1/128", "loopback"),
    ("169.254.0.0/16", "link-local"), ("fe80::/10", "link-local"),
    ("10.0.0.0/8", "private"), ("172.16.0.0/12", "private"), ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("fc00::/7", "unique-local"), ("fec0::/10", "site-local"),
    ("0.0.0.0/8", "this network"), ("::/128", "unspecified"),
    ("224.0.0.0/4", "multicast"), ("ff00::/8", "multicast"),
    ("255.255.255.255/32", "broadcast"), ("240.0.0.0/4", "reserved"),
    ("192.0.0.0/24", "IETF protocol assignments"), ("192.0.2.0/24", "documentation"),
    ("198.51.100.0/24", "documentation"), ("203.0.113.0/24", "documentation"), ("2001:db8::/32", "documentation"),
    ("198.18.0.0/15", "benchmarking"), ("100::/64", "discard-only"),
)
REFUSED: tuple[tuple[Network, str], ...] = tuple((ipaddress.ip_network(n), why) for n, why in _REFUSED)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")


class EgressRefused(Exception):
    """A destination the policy refuses; the message names the host, never a header or a body."""


def parse_allow(value: Optional[str]) -> tuple[Network, ...]:
    """`AGENTS_CORE_EGRESS_ALLOW`: comma-separated CIDRs (or single addresses). A bad entry is an error
    at start, never silently ignored."""
    networks = []
    for raw in (value or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"{ALLOW_VARIABLE}: '{entry}' is not a CIDR such as 127.0.0.0/8 or 10.20.0.0/16") from None
    return tuple(networks)


def parse_registries(value: Optional[str]) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_REGISTRIES
    hosts = tuple(h.strip().lower().rstrip(".") for h in value.split(",") if h.strip())
    for host in hosts:
        if not host or "/" in host or ":" in host:
            raise ValueError(f"{REGISTRIES_VARIABLE}: '{host}' is not a host name such as pypi.org")
    return hosts


def embedded_ipv4(address: IPAddress) -> Optional[ipaddress.IPv4Address]:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4, Teredo's server is not the
    destination), which is what the packet finally reaches."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or address in _NAT64_LOCAL:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _TEREDO and address.teredo is not None:
        return address.teredo[1]
    # IPv4-compatible (::a.b.c.d, deprecated) addresses
    if int(address) >> 32 == 0 and int(address) > 1:
        return ipaddress.IPv4Address(int(address))
    return None


def host_addresses() -> frozenset[IPAddress]:
    """This host's own addresses (every interface, IPv4 and IPv6), read from /proc."""
    found: set[IPAddress] = set()
    try:
        lines = pathlib.Path("/proc/net/fib_trie").read_text().splitlines()
        for i, line in enumerate(lines):
            if "/32 host LOCAL" in line and i > 0:
                word = lines[i - 1].strip().split()[-1]
                found.add(ipaddress.ip_address(word))
    except (OSError, ValueError):
        pass
    try:
        for line in pathlib.Path("/proc/net/if_inet6").read_text().splitlines():
            raw = line.split()[0]
            found.add(ipaddress.IPv6Address(int(raw, 16)))
    except (OSError, ValueError, IndexError):
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(ipaddress.ip_address(info[4][0].split("%")[0]))
    except (OSError, ValueError):
        pass
    return frozenset(found)


@dataclass
class EgressPolicy:
    """Which addresses a tenant-driven connection may reach: the public internet, plus `allow`."""

    allow: tuple[Network, ...] = ()
    own: Callable[[], Iterable[IPAddress]] = host_addresses
    own_ttl: float = 10.0
    # read on first use whatever the monotonic clock reads (it counts from boot: it may be below own_ttl)
    _own_cache: tuple[float, frozenset[IPAddress]] = field(default=(float("-inf"), frozenset()), repr=False)

    @classmethod
    def from_environment(cls) -> EgressPolicy:
        return cls(parse_allow(os.environ.get(ALLOW_VARIABLE)))

    def _own_addresses(self) -> frozenset[IPAddress]:
        at, cached = self._own_cache
        now = time.monotonic()
        if now - at > self.own_ttl:
            cached = frozenset(self.own())
            self._own_cache = (now, cached)
        return cached

    def _allowed_by_setting(self, address: IPAddress) -> bool:
        candidates = [address]
        inner = embedded_ipv4(address)
        if inner is not None:
            candidates.append(inner)
        # The setting must cover the address the packet finally reaches (a mapped address is its IPv4).
        final = candidates[-1]
        return any(final.version == net.version and final in net for net in self.allow)

    def refusal(self, address: Union[str, IPAddress]) -> Optional[str]:
        """None when `address` may be reached, else why not ('loopback', 'private', ...)."""
        if isinstance(address, str):
            address = ipaddress.ip_address(address.split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
            address = ipaddress.IPv6Address(address.compressed.split("%")[0])
        if self._allowed_by_setting(address):
            return None
        inner = embedded_ipv4(address)
        # the IPv4 inside first: the packet finally reaches it, and its range is the reason to name
        for candidate in ([inner, address] if inner is not None else [address]):
            for network, why in REFUSED:
                if candidate.version == network.version and candidate in network:
                    return why
            if not candidate.is_global:
                return "not a public address"
        own = self._own_addresses()
        if address in own or (inner is not None and inner in own):
            return "this host's own address"
        return None

    def check(self, address: Union[str, IPAddress]) -> None:
        why = self.refusal(address)
        if why is not None:
            raise EgressRefused(f"{address} is {why}")

    async def resolve(self, host: str, port: int, *, loop: Optional[asyncio.AbstractEventLoop] = None
                      ) -> list[tuple[int, IPAddress]]:
        """The addresses of `host` this policy allows (resolved here, once, for this connection), in
        the resolver's order; EgressRefused when there are none."""
        host = host.strip("[]")
        try:
            literal: Optional[IPAddress] = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            literal = None
        if literal is not None:
            self.check(literal)
            return [(socket.AF_INET6 if literal.version == 6 else socket.AF_INET, literal)]
        loop = loop or asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT)
        except (TimeoutError, OSError, UnicodeError) as exc:
            raise EgressRefused(f"{host} does not resolve ({type(exc).__name__})") from None
        allowed: list[tuple[int, IPAddress]] = []
        reasons = []
        for family, _, _, _, sockaddr in infos:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
            why = self.refusal(address)
            if why is None:
                if (family, address) not in allowed:
                    allowed.append((family, address))
            else:
                reasons.append(f"{address} is {why}")
        if not allowed:
            raise EgressRefused(f"{host} resolves only to refused addresses ({'; '.join(sorted(set(reasons)))})")
        return allowed


@dataclass(frozen=True)
class Route:
    """Who is asking (for the log) and what they may reach: `hosts` None means any public host;
    a tuple limits the destination's host names (package registries)."""

    identity: str
    hosts: Optional[tuple[str, ...]] = None
    bridge: Optional[str] = None  # the namespace's own model bridge socket (its loopback bridge port)

    def permits_host(self, host: str) -> bool:
        if self.hosts is None:
            return True
        name = host.lower().rstrip(".")
        return name in self.hosts


class EgressProxy(LoopServer):
    """The HTTP(S) egress proxy: a Unix socket per identity (an Environment's sandbox, a package install,
    a shared Runtime's Harness processes) and one loopback TCP port for this Runtime's own process (the
    scripted Harness's MCP client). Every connection is resolved and checked here."""

    thread_name = "egress proxy"

    def __init__(self, policy: EgressPolicy, directory: str, *, registries: tuple[str, ...] = DEFAULT_REGISTRIES,
                 bridge_port: int = 0):
        """`directory`: where the Unix sockets live (mode 0711, this process's own). `bridge_port`: the
        loopback port a namespace reaches its model bridge on: a proxied request for 127.0.0.1:<that port>
        from a namespace is that namespace's own bridge, not the host's loopback."""
        super().__init__()
        self.policy = policy
        self.directory = pathlib.Path(directory)
        self.registries = registries
        self.bridge_port = bridge_port
        self.port = 0
        self._servers: dict[str, asyncio.AbstractServer] = {}
        self.connections = 0
        self.refused = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _listen(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o711)  # noqa: S103 - traversable to reach a socket bound by path, not listable
        tcp = await asyncio.start_server(lambda r, w: self._serve(r, w, Route("runtime")), "127.0.0.1", 0)
        self.port = tcp.sockets[0].getsockname()[1]
        self._servers["tcp"] = tcp

    def socket_for(self, identity: str, *, packages: bool = False, owner: Optional[int] = None,
                   bridge: Optional[str] = None) -> str:
        """The Unix socket of one identity (created once): bind it into that namespace only. `packages`:
        the package registries only; `bridge`: the namespace's bridge socket."""
        name = f"{identity}.pkg.sock" if packages else f"{identity}.sock"
        route = Route(identity + (" (packages)" if packages else ""), self.registries if packages else None,
                      None if packages else bridge)
        return self.unix_socket(self.directory / name, lambda r, w: self._serve(r, w, route), self._servers, owner)

    def stop(self) -> None:
        async def shutdown() -> None:
            for server in self._servers.values():
                server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        except Exception:  # noqa: BLE001 - stopping anyway
            log.debug("egress proxy shutdown incomplete", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)

    # -- one client connection ------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, route: Route) -> None:
        upstream: Optional[asyncio.StreamWriter] = None
        self.connections += 1
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            except asyncio.LimitOverrunError:
                await _answer(writer, 431, "request head too large")
                return
            if len(head) > HEAD_LIMIT:
                await _answer(writer, 431, "request head too large")
                return
            lines = head[:-4].split(b"\r\n")
            try:
                method, target, version = lines[0].decode("latin-1").split(" ", 2)
            except ValueError:
                await _answer(writer, 400, "not an HTTP request")
                return
            if method.upper() == "CONNECT":
                try:
                    host, port = _authority(target)
                except ValueError:
                    await _answer(writer, 400, "CONNECT takes host:port")
                    return
                rest = b""
            else:
                parts = urllib.parse.urlsplit(target)
                if parts.scheme != "http" or not parts.hostname:
                    await _answer(writer, 400, "the egress proxy takes absolute http:// requests and CONNECT "
                                               "(use an https:// URL through CONNECT)")
                    return
                host, port = parts.hostname, parts.port or 80
                path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
                headers = [line for line in lines[1:] if not line.lower().startswith((b"proxy-", b"connection:",
                                                                                     b"keep-alive:"))]
                # one head even with no header left (no empty line before Connection: close)
                rest = b"\r\n".join([f"{method} {path} {version}".encode("latin-1"), *headers,
                                      b"Connection: close", b"", b""])
            opened = await self._connect(route, host, port)
            if isinstance(opened, str):
                await _answer(writer, 403, opened)
                return
            upstream_reader, upstream = opened
            if method.upper() == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                upstream.write(rest)
                await upstream.drain()
            await asyncio.gather(pipe(reader, upstream), pipe(upstream_reader, writer))
        except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            log.debug("egress %s: %s", route.identity, type(exc).__name__)
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()

    async def _connect(self, route: Route, host: str, port: int
                       ) -> Union[str, tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        """(reader, writer) to the checked destination, or why it is refused."""
        name = host.strip("[]").lower()
        if route.bridge and port == self.bridge_port and name in ("127.0.0.1", "localhost", "::1"):
            # the namespace's own loopback service (the model bridge), not the host's
            return await asyncio.open_unix_connection(route.bridge)
        if not route.permits_host(name):
            self.refused += 1
            why = f"{host} is not a package registry this host allows ({', '.join(route.hosts or ())})"
            log.info("egress refused: %s -> %s:%s (not a registry)", route.identity, name, port)
            return why
        if not 0 < port < 65536:
            return f"port {port} is not a TCP port"
        try:
            addresses = await self.policy.resolve(name, port)
        except EgressRefused as exc:
            self.refused += 1
            log.info("egress refused: %s -> %s:%s (%s)", route.identity, name, port, exc)
            return f"the egress policy refuses {host}:{port}: {exc}"
        last: Optional[BaseException] = None
        for family, address in addresses:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(str(address), port, family=family), CONNECT_TIMEOUT)
                log.info("egress: %s -> %s:%s (%s)", route.identity, name, port, address)
                return reader, writer
            except (TimeoutError, OSError) as exc:
                last = exc
        return f"{host}:{port} did not accept the connection ({type(last).__name__})"


def _authority(target: str) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError("CONNECT needs host:port")
    return host.strip("[]"), int(port)


async def _answer(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large"}.get(status, "Error")
    body = (message + "\n").encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\nX-Agents-Core-Egress: refused\r\n\r\n"
                 .encode() + body)
    try:
        await writer.drain()
    except OSError:
        pass

