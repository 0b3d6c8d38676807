"""The egress policy and proxy (runtime/egress.py): a tenant-driven connection reaches the public internet and
nothing else (loopback, link-local and the metadata service, private, CGNAT, unique-local, reserved, this host's
own addresses, IPv4 carried in IPv6), checked after resolving and again on every connection; one operator
setting (AGENTS_CORE_EGRESS_ALLOW) widens it; package installs reach the registries only. The policy is pure
(resolver and own addresses injected); the proxy runs on loopback and Unix sockets with no network."""

import asyncio
import ipaddress
import shutil
import socket
import tempfile
import threading
import types

import pytest

from runtime.environments import egress
from runtime.environments.egress import (
    DEFAULT_REGISTRIES,
    EgressPolicy,
    EgressProxy,
    EgressRefused,
    embedded_ipv4,
    parse_allow,
    parse_registries,
)

CGNAT = "shared address space (CGNAT)"


def nothing_of_its_own():
    return []


def policy(allow="", own=nothing_of_its_own, **kwargs):
    return EgressPolicy(allow=parse_allow(allow), own=own, **kwargs)


# -- the address policy: each refused range, IPv4 and IPv6 -----------------------------------------------------
REFUSED = [
    ("loopback 127.0.0.0/8", "127.0.0.1", "loopback"),
    ("loopback 127.0.0.0/8 all of it", "127.255.0.1", "loopback"),
    ("loopback ::1", "::1", "loopback"),
    ("link-local 169.254/16: the metadata service", "169.254.169.254", "link-local"),
    ("link-local 169.254/16", "169.254.0.1", "link-local"),
    ("link-local fe80::/10", "fe80::1", "link-local"),
    ("link-local fe80::/10 with a scope", "fe80::1%eth0", "link-local"),
    ("private 10/8", "10.0.0.1", "private"),
    ("private 10/8 top", "10.255.255.255", "private"),
    ("private 172.16/12 bottom", "172.16.0.1", "private"),
    ("private 172.16/12 top", "172.31.255.254", "private"),
    ("private 192.168/16", "192.168.1.1", "private"),
    ("CGNAT 100.64/10 bottom", "100.64.0.1", CGNAT),
    ("CGNAT 100.64/10 top", "100.127.255.254", CGNAT),
    ("unique-local fc00::/7", "fc00::1", "unique-local"),
    ("unique-local fc00::/7: the EC2 IPv6 metadata service", "fd00:ec2::254", "unique-local"),
    ("site-local fec0::/10", "fec0::1", "site-local"),
    ("this network 0.0.0.0", "0.0.0.0", "this network"),
    ("this network 0/8", "0.1.2.3", "this network"),
    ("unspecified ::", "::", "unspecified"),
    ("multicast 224/4", "224.0.0.1", "multicast"),
    ("multicast 224/4 SSDP", "239.255.255.250", "multicast"),
    ("multicast ff00::/8", "ff02::1", "multicast"),
    ("reserved 240/4", "240.0.0.1", "reserved"),
    ("reserved 240/4 top", "255.255.255.254", "reserved"),
    ("broadcast 255.255.255.255", "255.255.255.255", "broadcast"),
    ("IETF protocol assignments 192.0.0/24", "192.0.0.8", "IETF protocol assignments"),
    ("documentation 192.0.2/24", "192.0.2.1", "documentation"),
    ("documentation 198.51.100/24", "198.51.100.7", "documentation"),
    ("documentation 203.0.113/24", "203.0.113.9", "documentation"),
    ("documentation 2001:db8::/32", "2001:db8::1", "documentation"),
    ("benchmarking 198.18/15", "198.18.0.1", "benchmarking"),
    ("discard-only 100::/64", "100::1", "discard-only"),
]


@pytest.mark.parametrize("rule,address,reason", REFUSED, ids=[r[0] for r in REFUSED])
def test_the_policy_refuses_what_is_not_the_public_internet_and_names_why(rule, address, reason):
    assert policy().refusal(address) == reason
    bare = address.split("%")[0]
    assert policy().refusal(ipaddress.ip_address(bare)) == reason  # an address object as well as a string
    with pytest.raises(EgressRefused) as refused:
        policy().check(bare)
    assert str(refused.value) == f"{bare} is {reason}"


ALLOWED = [
    ("public IPv4", "8.8.8.8"),
    ("public IPv4 (another)", "1.1.1.1"),
    ("public IPv6", "2606:4700:4700::1111"),
    ("just above private 172.16/12", "172.32.0.1"),
    ("just below private 172.16/12", "172.15.255.255"),
    ("just above CGNAT 100.64/10", "100.128.0.1"),
    ("just below CGNAT 100.64/10", "100.63.255.255"),
    ("just above private 192.168/16", "192.169.0.1"),
    ("just above private 10/8", "11.0.0.1"),
    ("NAT64 of a public IPv4", "64:ff9b::808:808"),
]


@pytest.mark.parametrize("rule,address", ALLOWED, ids=[r[0] for r in ALLOWED])
def test_the_policy_allows_the_public_internet(rule, address):
    assert policy().refusal(address) is None
    policy().check(address)


# -- IPv4 carried in IPv6: refused for the IPv4 the packet finally reaches -----------------------------------
EMBEDDED = [
    ("mapped loopback", "::ffff:127.0.0.1", "127.0.0.1", "loopback"),
    ("mapped metadata", "::ffff:169.254.169.254", "169.254.169.254", "link-local"),
    ("mapped private", "::ffff:10.0.0.1", "10.0.0.1", "private"),
    ("mapped CGNAT", "::ffff:100.64.0.1", "100.64.0.1", CGNAT),
    ("NAT64 loopback", "64:ff9b::7f00:1", "127.0.0.1", "loopback"),
    ("NAT64 metadata", "64:ff9b::a9fe:a9fe", "169.254.169.254", "link-local"),
    ("local-use NAT64 private", "64:ff9b:1::a00:1", "10.0.0.1", "private"),
    ("6to4 loopback", "2002:7f00:1::", "127.0.0.1", "loopback"),
    ("6to4 metadata", "2002:a9fe:a9fe::1", "169.254.169.254", "link-local"),
    ("IPv4-compatible loopback", "::127.0.0.1", "127.0.0.1", "loopback"),
    ("IPv4-compatible metadata", "::169.254.169.254", "169.254.169.254", "link-local"),
    ("Teredo client behind a documentation address", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45",
     "documentation"),
]


@pytest.mark.parametrize("rule,address,inner,reason", EMBEDDED, ids=[r[0] for r in EMBEDDED])
def test_an_ipv4_address_carried_in_ipv6_is_refused_with_the_reason_of_the_ipv4_inside(rule, address, inner, reason):
    assert embedded_ipv4(ipaddress.ip_address(address)) == ipaddress.IPv4Address(inner)
    assert policy().refusal(inner) == reason
    assert policy().refusal(address) == reason


@pytest.mark.parametrize("address", ["8.8.8.8", "::1", "::", "2606:4700:4700::1111", "fd00:ec2::254"])
def test_an_address_that_carries_no_ipv4_has_none_embedded(address):
    assert embedded_ipv4(ipaddress.ip_address(address)) is None


def test_nat64_of_a_public_ipv4_is_allowed():
    assert embedded_ipv4(ipaddress.ip_address("64:ff9b::808:808")) == ipaddress.IPv4Address("8.8.8.8")
    assert policy().refusal("64:ff9b::808:808") is None


# -- this host's own addresses ---------------------------------------------------------------------------------
OWN = [
    ("own public IPv4", "8.8.4.4"),
    ("own public IPv4, mapped", "::ffff:8.8.4.4"),
    ("own public IPv4, NAT64", "64:ff9b::808:404"),
    ("own public IPv6", "2001:4860:4860::8844"),
]


@pytest.mark.parametrize("rule,address", OWN, ids=[r[0] for r in OWN])
def test_the_hosts_own_addresses_are_refused_even_when_public(rule, address):
    def own():
        return [ipaddress.ip_address("8.8.4.4"), ipaddress.ip_address("2001:4860:4860::8844")]

    assert policy(own=own).refusal(address) == "this host's own address"
    assert policy(own=own).refusal("8.8.8.8") is None


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(egress, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    return now


def test_the_hosts_own_addresses_are_read_again_once_their_ttl_has_passed(clock):
    addresses, reads = ["8.8.4.4"], []

    def own():
        reads.append(list(addresses))
        return [ipaddress.ip_address(a) for a in addresses]

    checked = policy(own=own, own_ttl=10.0)
    assert checked.refusal("8.8.4.4") == "this host's own address"
    addresses[:] = ["1.1.1.1"]  # the host's address changes
    clock[0] += 5
    assert checked.refusal("8.8.4.4") == "this host's own address"  # within the TTL: the cached answer
    assert checked.refusal("1.1.1.1") is None
    assert len(reads) == 1
    clock[0] += 6
    assert checked.refusal("1.1.1.1") == "this host's own address"  # past the TTL: read again
    assert checked.refusal("8.8.4.4") is None
    assert len(reads) == 2


def test_the_hosts_own_addresses_are_read_on_first_use_whatever_the_clock_reads(clock):
    clock[0] = 1.0  # a monotonic clock counts from boot: it may read less than the TTL
    checked = policy(own=lambda: [ipaddress.ip_address("8.8.4.4")], own_ttl=10.0)
    assert checked.refusal("8.8.4.4") == "this host's own address"


# -- AGENTS_CORE_EGRESS_ALLOW ---------------------------------------------------------------------------------
ALLOW_SETTINGS = [
    ("unset", None, ()),
    ("empty", "", ()),
    ("only separators", " , ,", ()),
    ("two CIDRs with spaces", " 127.0.0.0/8 , 10.20.0.0/16", ("127.0.0.0/8", "10.20.0.0/16")),
    ("a single address", "192.0.2.7", ("192.0.2.7/32",)),
    ("an IPv6 CIDR", "fd00:ec2::/64", ("fd00:ec2::/64",)),
    ("host bits set", "10.20.1.2/16", ("10.20.0.0/16",)),
]


@pytest.mark.parametrize("rule,value,networks", ALLOW_SETTINGS, ids=[r[0] for r in ALLOW_SETTINGS])
def test_the_allow_setting_is_comma_separated_cidrs(rule, value, networks):
    assert parse_allow(value) == tuple(ipaddress.ip_network(n) for n in networks)


@pytest.mark.parametrize("value,entry", [("localhost", "localhost"), ("10.0.0.0/33", "10.0.0.0/33"),
                                         ("127.0.0.0/8, nope", "nope"), ("*", "*")])
def test_a_bad_allow_entry_is_an_error_naming_it(value, entry):
    with pytest.raises(ValueError) as bad:
        parse_allow(value)
    assert str(bad.value) == (f"AGENTS_CORE_EGRESS_ALLOW: '{entry}' is not a CIDR such as 127.0.0.0/8 or "
                              "10.20.0.0/16")


WIDENED = [
    ("allowed loopback", "127.0.0.0/8", "127.0.0.1", None),
    ("allowed loopback, mapped", "127.0.0.0/8", "::ffff:127.0.0.1", None),
    ("allowed loopback, NAT64", "127.0.0.0/8", "64:ff9b::7f00:1", None),
    ("metadata still refused", "127.0.0.0/8", "169.254.169.254", "link-local"),
    ("IPv6 loopback not covered by an IPv4 CIDR", "127.0.0.0/8", "::1", "loopback"),
    ("private still refused", "127.0.0.0/8", "10.0.0.1", "private"),
    ("allowed private subnet", "10.20.0.0/16", "10.20.3.4", None),
    ("private outside the subnet", "10.20.0.0/16", "10.21.0.1", "private"),
    ("allowed IPv6 unique-local subnet", "fd00:ec2::/64", "fd00:ec2::254", None),
    ("mapped range does not cover the IPv4 inside", "::ffff:0:0/96", "::ffff:127.0.0.1", "loopback"),
    ("mapped range plus the IPv4 range", "::ffff:0:0/96,127.0.0.0/8", "::ffff:127.0.0.1", None),
    ("NAT64 range does not cover the IPv4 inside", "64:ff9b::/96", "64:ff9b::a9fe:a9fe", "link-local"),
]


@pytest.mark.parametrize("rule,allow,address,reason", WIDENED, ids=[r[0] for r in WIDENED])
def test_the_allow_setting_widens_the_policy_only_for_the_address_finally_reached(rule, allow, address, reason):
    assert policy(allow).refusal(address) == reason


def test_the_policy_reads_the_allow_setting_from_the_environment(monkeypatch):
    monkeypatch.setenv("AGENTS_CORE_EGRESS_ALLOW", "127.0.0.0/8, 10.20.0.0/16")
    assert EgressPolicy.from_environment().allow == parse_allow("127.0.0.0/8,10.20.0.0/16")
    monkeypatch.delenv("AGENTS_CORE_EGRESS_ALLOW")
    assert EgressPolicy.from_environment().allow == ()
    monkeypatch.setenv("AGENTS_CORE_EGRESS_ALLOW", "")
    assert EgressPolicy.from_environment().allow == ()
    monkeypatch.setenv("AGENTS_CORE_EGRESS_ALLOW", "everything")
    with pytest.raises(ValueError, match="'everything' is not a CIDR"):
        EgressPolicy.from_environment()


# -- AGENTS_CORE_PACKAGE_REGISTRIES ---------------------------------------------------------------------------
REGISTRY_SETTINGS = [
    ("unset: PyPI and npm", None, ("pypi.org", "files.pythonhosted.org", "registry.npmjs.org")),
    ("empty: no registry", "", ()),
    ("lower-cased, spaces and a final dot dropped", " PyPI.org , Registry.NPMJS.org. ,",
     ("pypi.org", "registry.npmjs.org")),
]


@pytest.mark.parametrize("rule,value,hosts", REGISTRY_SETTINGS, ids=[r[0] for r in REGISTRY_SETTINGS])
def test_the_registries_setting_is_comma_separated_host_names(rule, value, hosts):
    assert parse_registries(value) == hosts
    assert DEFAULT_REGISTRIES == REGISTRY_SETTINGS[0][2]


@pytest.mark.parametrize("value,entry", [("https://pypi.org", "https://pypi.org"), ("pypi.org:443", "pypi.org:443"),
                                         ("pypi.org, PyPI.org/Simple", "pypi.org/simple"), (".", "")])
def test_a_bad_registry_entry_is_an_error_naming_it(value, entry):
    with pytest.raises(ValueError) as bad:
        parse_registries(value)
    assert str(bad.value) == f"AGENTS_CORE_PACKAGE_REGISTRIES: '{entry}' is not a host name such as pypi.org"


# -- resolving: every connection resolves and checks again (no DNS rebinding) --------------------------------
def addrinfo(address, port):
    if ipaddress.ip_address(address).version == 4:
        return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))
    return (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))


class Resolver:
    """An event loop's getaddrinfo that answers from a script, one answer per call (a name that rebinds)."""

    def __init__(self, answers, fallback=None):
        self.answers = {name: list(a) for name, a in answers.items()}
        self.fallback = fallback
        self.asked = []

    async def getaddrinfo(self, host, port, **kwargs):
        self.asked.append(host)
        if host not in self.answers:
            if self.fallback is not None:
                return await self.fallback(host, port, **kwargs)
            raise AssertionError(f"{host} was resolved")
        answer = self.answers[host].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return [addrinfo(a, port) for a in answer]


def resolve(checked, host, resolver, port=443):
    return asyncio.run(checked.resolve(host, port, loop=resolver))


def test_a_name_that_rebinds_to_loopback_is_refused_on_the_next_resolution():
    resolver = Resolver({"rebind.example": [["93.184.216.34"], ["127.0.0.1"]]})
    assert resolve(policy(), "rebind.example", resolver) == [(socket.AF_INET, ipaddress.ip_address("93.184.216.34"))]
    with pytest.raises(EgressRefused) as refused:
        resolve(policy(), "rebind.example", resolver)
    assert str(refused.value) == "rebind.example resolves only to refused addresses (127.0.0.1 is loopback)"
    assert resolver.asked == ["rebind.example", "rebind.example"]


def test_a_name_resolving_to_public_and_refused_addresses_gives_only_the_public_ones_in_order():
    answers = ["10.0.0.5", "93.184.216.34", "::1", "2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34",
               "::ffff:127.0.0.1", "fd00:ec2::254"]
    resolver = Resolver({"mixed.example": [answers]})
    assert resolve(policy(), "mixed.example", resolver) == [
        (socket.AF_INET, ipaddress.ip_address("93.184.216.34")),
        (socket.AF_INET6, ipaddress.ip_address("2606:2800:220:1:248:1893:25c8:1946")),
    ]


def test_a_name_resolving_only_to_refused_addresses_is_refused_with_every_reason():
    resolver = Resolver({"metadata.example": [["169.254.169.254", "127.0.0.1", "fd00:ec2::254", "10.1.2.3",
                                               "127.0.0.1", "fe80::1%eth0"]]})
    with pytest.raises(EgressRefused) as refused:
        resolve(policy(), "metadata.example", resolver)
    assert str(refused.value) == ("metadata.example resolves only to refused addresses (10.1.2.3 is private; "
                                  "127.0.0.1 is loopback; 169.254.169.254 is link-local; fd00:ec2::254 is "
                                  "unique-local; fe80::1 is link-local)")


def test_a_name_resolving_to_the_hosts_own_address_is_refused():
    resolver = Resolver({"me.example": [["8.8.4.4"]]})
    with pytest.raises(EgressRefused) as refused:
        resolve(policy(own=lambda: [ipaddress.ip_address("8.8.4.4")]), "me.example", resolver)
    assert str(refused.value) == "me.example resolves only to refused addresses (8.8.4.4 is this host's own address)"


def test_a_name_resolving_to_loopback_is_allowed_when_the_setting_allows_loopback():
    resolver = Resolver({"mcp.example": [["127.0.0.1", "169.254.169.254"]]})
    assert resolve(policy("127.0.0.0/8"), "mcp.example", resolver) == [
        (socket.AF_INET, ipaddress.ip_address("127.0.0.1"))]


@pytest.mark.parametrize("error,name", [(socket.gaierror(-2, "Name or service not known"), "gaierror"),
                                        (TimeoutError(), "TimeoutError"), (UnicodeError("label too long"),
                                                                           "UnicodeError")])
def test_a_name_that_does_not_resolve_is_refused(error, name):
    resolver = Resolver({"nowhere.invalid": [error]})
    with pytest.raises(EgressRefused) as refused:
        resolve(policy(), "nowhere.invalid", resolver)
    assert str(refused.value) == f"nowhere.invalid does not resolve ({name})"


LITERALS = [
    ("IPv4 loopback", "127.0.0.1", "127.0.0.1 is loopback"),
    ("bracketed IPv6 loopback", "[::1]", "::1 is loopback"),
    ("bracketed link-local with a scope", "[fe80::1%eth0]", "fe80::1 is link-local"),
    ("metadata", "169.254.169.254", "169.254.169.254 is link-local"),
    ("bracketed mapped metadata", "[::ffff:169.254.169.254]",
     f"{ipaddress.ip_address('::ffff:169.254.169.254')} is link-local"),  # its spelling varies with Python
    ("bracketed EC2 IPv6 metadata", "[fd00:ec2::254]", "fd00:ec2::254 is unique-local"),
]


@pytest.mark.parametrize("rule,host,message", LITERALS, ids=[r[0] for r in LITERALS])
def test_an_address_literal_is_checked_without_resolving(rule, host, message):
    resolver = Resolver({})
    with pytest.raises(EgressRefused) as refused:
        resolve(policy(), host, resolver)
    assert str(refused.value) == message
    assert resolver.asked == []


@pytest.mark.parametrize("host,family,address", [("8.8.8.8", socket.AF_INET, "8.8.8.8"),
                                                 ("[2606:4700:4700::1111]", socket.AF_INET6, "2606:4700:4700::1111")])
def test_a_public_address_literal_is_returned_without_resolving(host, family, address):
    resolver = Resolver({})
    assert resolve(policy(), host, resolver) == [(family, ipaddress.ip_address(address))]
    assert resolver.asked == []


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "localhost"])
def test_loopback_spelt_otherwise_is_resolved_and_refused(host):
    # inet_aton shorthands are not address literals to Python: the system resolver turns them into 127.0.0.1
    with pytest.raises(EgressRefused, match=r"resolves only to refused addresses \(.*127\.0\.0\.1 is loopback"):
        asyncio.run(policy().resolve(host, 80))


# -- the proxy, end to end on loopback and Unix sockets --------------------------------------------------------
class Upstream:
    """A listener that records the head of each connection and answers `body` (HTTP/1.0, then closes)."""

    def __init__(self, body, path=None):
        family = socket.AF_UNIX if path else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.bind(path or ("127.0.0.1", 0))
        self.listener.listen(16)
        self.address = path or self.listener.getsockname()
        self.port = None if path else self.address[1]
        self.body = body
        self.heads = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                head = b""
                try:
                    while b"\r\n\r\n" not in head:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        head += chunk
                    self.heads.append(head)
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(self.body), self.body))
                except OSError:
                    pass

    def close(self):
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()


def connect(address):
    client = socket.socket(socket.AF_UNIX if isinstance(address, str) else socket.AF_INET, socket.SOCK_STREAM)
    client.settimeout(5)
    client.connect(address)
    return client


def read_all(client):
    chunks = []
    while chunk := client.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def ask(address, request):
    """Send one request to the proxy at `address` (a TCP (host, port) or a Unix socket path); its whole answer."""
    with connect(address) as client:
        client.sendall(request)
        return read_all(client)


def tunnel(address, target, data):
    """CONNECT `target` through the proxy, then send `data`: (the proxy's answer head, what came back)."""
    with connect(address) as client:
        client.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(1)
            if not chunk:
                return head, b""
            head += chunk
        if not head.startswith(b"HTTP/1.1 200 "):
            return head + read_all(client), b""
        client.sendall(data)
        return head, read_all(client)


def status_and_body(answer):
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode()


@pytest.fixture
def directory():
    path = tempfile.mkdtemp(prefix="egress-")  # short: a Unix socket path is at most 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def upstream():
    server = Upstream(b"from the upstream")
    yield server
    server.close()


@pytest.fixture
def start_proxy(directory):
    started = []

    def start(allow="", **kwargs):
        proxy = EgressProxy(policy(allow), directory, **kwargs).start()
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


def tcp(proxy):
    assert proxy.url == f"http://127.0.0.1:{proxy.port}"
    return ("127.0.0.1", proxy.port)


def test_an_allowed_absolute_form_request_reaches_the_server_in_origin_form_without_proxy_headers(start_proxy,
                                                                                                   upstream):
    proxy = start_proxy("127.0.0.0/8")
    answer = ask(tcp(proxy), (f"GET http://127.0.0.1:{upstream.port}/x?q=1 HTTP/1.1\r\n"
                              f"Host: 127.0.0.1:{upstream.port}\r\nUser-Agent: test\r\n"
                              "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
                              "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nAccept: */*\r\n\r\n").encode())
    assert status_and_body(answer) == (200, "from the upstream")
    assert upstream.heads == [(f"GET /x?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{upstream.port}\r\nUser-Agent: test\r\n"
                               "Accept: */*\r\nConnection: close\r\n\r\n").encode()]


def test_a_request_without_headers_is_forwarded_as_one_well_formed_head(start_proxy, upstream):
    proxy = start_proxy("127.0.0.0/8")
    answer = ask(tcp(proxy), f"GET http://127.0.0.1:{upstream.port} HTTP/1.0\r\nProxy-Connection: close\r\n\r\n"
                 .encode())
    assert status_and_body(answer) == (200, "from the upstream")
    assert upstream.heads == [b"GET / HTTP/1.0\r\nConnection: close\r\n\r\n"]


def test_an_allowed_connect_tunnels_bytes_both_ways(start_proxy, upstream):
    proxy = start_proxy("127.0.0.0/8")
    head, back = tunnel(tcp(proxy), f"127.0.0.1:{upstream.port}", b"not even HTTP\r\n\r\n")
    assert head == b"HTTP/1.1 200 Connection Established\r\n\r\n"
    assert status_and_body(back) == (200, "from the upstream")
    assert upstream.heads == [b"not even HTTP\r\n\r\n"]  # verbatim: a tunnel does not rewrite


REFUSED_BY_DEFAULT = [
    ("loopback, absolute form", "GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: x\r\n\r\n",
     "the egress policy refuses 127.0.0.1:{port}: 127.0.0.1 is loopback"),
    ("loopback, CONNECT", "CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n",
     "the egress policy refuses 127.0.0.1:{port}: 127.0.0.1 is loopback"),
    ("IPv6 loopback, CONNECT", "CONNECT [::1]:{port} HTTP/1.1\r\n\r\n",
     "the egress policy refuses ::1:{port}: ::1 is loopback"),
    ("mapped loopback, absolute form", "GET http://[::ffff:127.0.0.1]:{port}/ HTTP/1.1\r\n\r\n",
     "the egress policy refuses ::ffff:127.0.0.1:{port}: " + f"{ipaddress.ip_address('::ffff:127.0.0.1')} is loopback"),
    ("metadata, absolute form", "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n",
     "the egress policy refuses 169.254.169.254:80: 169.254.169.254 is link-local"),
    ("EC2 IPv6 metadata, CONNECT", "CONNECT [fd00:ec2::254]:80 HTTP/1.1\r\n\r\n",
     "the egress policy refuses fd00:ec2::254:80: fd00:ec2::254 is unique-local"),
    ("not a TCP port", "CONNECT 8.8.8.8:70000 HTTP/1.1\r\n\r\n", "port 70000 is not a TCP port"),
]


@pytest.mark.parametrize("rule,request_,message", REFUSED_BY_DEFAULT, ids=[r[0] for r in REFUSED_BY_DEFAULT])
def test_by_default_the_proxy_answers_403_naming_the_refusal_and_nothing_reaches_the_server(start_proxy, upstream,
                                                                                           rule, request_, message):
    proxy = start_proxy()
    answer = ask(tcp(proxy), request_.format(port=upstream.port).encode())
    assert status_and_body(answer) == (403, message.format(port=upstream.port) + "\n")
    assert b"\r\nX-Agents-Core-Egress: refused\r\n" in answer
    assert upstream.heads == []


def test_a_name_the_system_resolves_to_loopback_is_refused_by_the_proxy(start_proxy, upstream):
    proxy = start_proxy()
    status, body = status_and_body(ask(tcp(proxy), f"CONNECT localhost:{upstream.port} HTTP/1.1\r\n\r\n".encode()))
    assert status == 403 and "localhost resolves only to refused addresses" in body and "127.0.0.1 is loopback" in body
    assert upstream.heads == [] and proxy.refused == 1


def test_every_connection_through_the_proxy_is_resolved_and_checked_again(start_proxy, upstream, monkeypatch):
    proxy = start_proxy("127.0.0.0/8")
    resolver = Resolver({"rebind.test": [["127.0.0.1"], ["169.254.169.254"]]}, fallback=proxy.loop.getaddrinfo)
    monkeypatch.setattr(proxy.loop, "getaddrinfo", resolver.getaddrinfo)
    first = ask(tcp(proxy), f"GET http://rebind.test:{upstream.port}/first HTTP/1.1\r\nHost: rebind.test\r\n\r\n"
                .encode())
    assert status_and_body(first) == (200, "from the upstream")
    second = ask(tcp(proxy), f"GET http://rebind.test:{upstream.port}/second HTTP/1.1\r\nHost: rebind.test\r\n\r\n"
                 .encode())
    assert status_and_body(second) == (403, f"the egress policy refuses rebind.test:{upstream.port}: rebind.test "
                                             "resolves only to refused addresses (169.254.169.254 is link-local)\n")
    assert [h.split(b"\r\n")[0] for h in upstream.heads] == [b"GET /first HTTP/1.1"]
    assert resolver.asked == ["rebind.test", "rebind.test"]


BAD_REQUESTS = [
    ("https absolute form", "GET https://127.0.0.1:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n",
     "the egress proxy takes absolute http:// requests and CONNECT (use an https:// URL through CONNECT)"),
    ("origin form", "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
     "the egress proxy takes absolute http:// requests and CONNECT (use an https:// URL through CONNECT)"),
    ("garbage request line", "garbage\r\n\r\n", "not an HTTP request"),
    ("request line without a version", "GET http://127.0.0.1:{port}/\r\n\r\n", "not an HTTP request"),
    ("CONNECT without a port", "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n", "CONNECT takes host:port"),
]


@pytest.mark.parametrize("rule,request_,message", BAD_REQUESTS, ids=[r[0] for r in BAD_REQUESTS])
def test_what_is_not_a_proxy_request_is_a_400(start_proxy, upstream, rule, request_, message):
    proxy = start_proxy("127.0.0.0/8")
    answer = ask(tcp(proxy), request_.format(port=upstream.port).encode())
    assert status_and_body(answer) == (400, message + "\n")
    assert upstream.heads == []


def test_the_registries_only_socket_refuses_any_other_host_without_resolving_it(start_proxy, upstream, monkeypatch):
    proxy = start_proxy("127.0.0.0/8")
    resolver = Resolver({"pypi.org": [socket.gaierror(-2, "Name or service not known")]})
    monkeypatch.setattr(proxy.loop, "getaddrinfo", resolver.getaddrinfo)
    path = proxy.socket_for("env_x", packages=True)
    assert path.endswith("/env_x.pkg.sock") and proxy.socket_for("env_x", packages=True) == path
    registries = "pypi.org, files.pythonhosted.org, registry.npmjs.org"
    for request, host in [("CONNECT evil.example:443 HTTP/1.1\r\n\r\n", "evil.example"),
                          ("GET http://evil.example/simple/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", "evil.example"),
                          (f"GET http://127.0.0.1:{upstream.port}/ HTTP/1.1\r\n\r\n", "127.0.0.1")]:
        answer = ask(path, request.encode())
        assert status_and_body(answer) == (403, f"{host} is not a package registry this host allows ({registries})\n")
    assert resolver.asked == [] and upstream.heads == []  # never resolved, never reached (loopback allowed or not)
    # a registry passes the host check and then the address policy (here: it does not resolve)
    answer = ask(path, b"CONNECT PyPI.org:443 HTTP/1.1\r\n\r\n")
    assert status_and_body(answer) == (403, "the egress policy refuses PyPI.org:443: pypi.org does not resolve "
                                            "(gaierror)\n")
    assert resolver.asked == ["pypi.org"]


@pytest.fixture
def bridge(directory):
    server = Upstream(b"from the namespace's own bridge", path=f"{directory}/bridge.sock")
    yield server
    server.close()


@pytest.mark.parametrize("allow", ["127.0.0.0/8", ""], ids=["loopback allowed", "default policy"])
def test_the_bridge_port_on_loopback_is_the_namespaces_own_bridge_and_only_for_that_identity(start_proxy, upstream,
                                                                                           bridge, allow):
    proxy = start_proxy(allow, bridge_port=upstream.port)  # the host's loopback listener on that very port
    mine = proxy.socket_for("env_b", bridge=bridge.address)
    without = proxy.socket_for("env_c")
    for target in [f"127.0.0.1:{upstream.port}", f"localhost:{upstream.port}", f"[::1]:{upstream.port}"]:
        answer = ask(mine, f"GET http://{target}/v1/responses HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        assert status_and_body(answer) == (200, "from the namespace's own bridge")
    head, back = tunnel(mine, f"127.0.0.1:{upstream.port}", b"tunnelled\r\n\r\n")
    assert status_and_body(back) == (200, "from the namespace's own bridge")
    assert [h.split(b"\r\n")[0] for h in bridge.heads] == [b"GET /v1/responses HTTP/1.1"] * 3 + [b"tunnelled"]
    assert upstream.heads == []
    # the Runtime's own TCP identity and a namespace without a bridge: the host's loopback, under the policy
    request = f"GET http://127.0.0.1:{upstream.port}/v1/responses HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    for address in [tcp(proxy), without]:
        status, body = status_and_body(ask(address, request))
        if allow:
            assert (status, body) == (200, "from the upstream")
        else:
            assert (status, body) == (403, f"the egress policy refuses 127.0.0.1:{upstream.port}: 127.0.0.1 is "
                                           "loopback\n")
    assert len(bridge.heads) == 4 and len(upstream.heads) == (2 if allow else 0)
    # another loopback port from the namespace with a bridge is the host's loopback, under the policy
    other = Upstream(b"another host listener")
    try:
        status, _ = status_and_body(ask(mine, f"GET http://127.0.0.1:{other.port}/ HTTP/1.1\r\n\r\n".encode()))
        assert status == (200 if allow else 403) and len(other.heads) == (1 if allow else 0)
    finally:
        other.close()
