"""http_get: fetch a URL from an allowlist of hosts, with size and time limits and no SSRF.

Allowlist entries are host names (``docs.example.com``), IP addresses or CIDRs
(``127.0.0.1``, ``10.0.0.0/8``). Default: empty, so nothing is fetched until an
operator says otherwise. A URL is fetched only if

- its scheme is http or https and it carries no credentials;
- its host is an allowlisted name, or an IP literal inside an allowlisted
  address/CIDR;
- every address its name resolves to is inside an allowlisted address/CIDR or
  is a public (globally routable) address — so a permitted name that resolves
  to 127.0.0.1, 169.254.169.254 or a private range is refused (DNS rebinding);
- an IPv6 address that carries an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``,
  IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::/96`` and ``64:ff9b:1::/48``,
  6to4 ``2002::/16``, Teredo ``2001::/32``) is judged by the IPv4 addresses it
  carries: Python counts ``64:ff9b::a9fe:a9fe`` and ``2002:a9fe:a9fe::1`` as
  global, yet a NAT64 gateway or 6to4 relay delivers them to 169.254.169.254;
- the connection goes to exactly the addresses that were checked (a resolver
  that returns only those), so nothing is resolved twice;
- every redirect target passes the same checks (redirects are followed by
  hand, at most ``max_redirects``).

The body is read up to ``max_bytes``; more is an error, not a truncation.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from services.tools.registry import ToolDefinition, ToolError, ToolExample

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def embedded_ipv4(ip: IpAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address delivers to (see module docstring); () if none."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ()
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    if any(ip in net for net in _NAT64):
        return (low32,)
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # :: and ::1 are not IPv4-compatible forms
        return (low32,)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return ip.teredo  # (server, client): the relay talks to both
    return ()


class Allowlist:
    """Which hosts and addresses http_get may reach (see module docstring)."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.names: set[str] = set()
        self.networks: list[IpNetwork] = []
        for raw in entries:
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.names.add(entry)

    def _in_networks(self, ip: IpAddress) -> bool:
        return any(ip in net for net in self.networks)

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return host in self.names
        inner = embedded_ipv4(ip)
        return self._in_networks(ip) or (bool(inner) and all(self._in_networks(v4) for v4 in inner))

    def address_allowed(self, ip: IpAddress) -> bool:
        """Allowlisted, or public; an address carrying IPv4 addresses is judged by those alone."""
        if self._in_networks(ip):
            return True
        inner = embedded_ipv4(ip)
        if inner:
            return all(self._in_networks(v4) or v4.is_global for v4 in inner)
        return ip.is_global


class CheckedResolver(AbstractResolver):
    """Resolves, then refuses the whole host if any address is not allowed."""

    def __init__(self, allowlist: Allowlist) -> None:
        self._allowlist = allowlist

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, family=family)
        except socket.gaierror as exc:
            raise ToolError(f"cannot resolve {host}: {exc.strerror}") from None
        results: list[ResolveResult] = []
        for fam, _, proto, _, sockaddr in infos:
            ip = ipaddress.ip_address(sockaddr[0])
            if not self._allowlist.address_allowed(ip):
                raise ToolError(f"{host} resolves to {ip}, which is not allowed")
            results.append({"hostname": host, "host": str(ip), "port": port, "family": fam, "proto": proto, "flags": 0})
        return results

    async def close(self) -> None:
        return None


def check_url(url: str, allowlist: Allowlist) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs are allowed, not {parts.scheme or 'none'!r}")
    if parts.username or parts.password:
        raise ToolError("URLs with credentials are not allowed")
    host = parts.hostname or ""
    if not host:
        raise ToolError("the URL has no host")
    if not allowlist.host_allowed(host):
        raise ToolError(f"host {host!r} is not on the allowlist")
    return url


def summarize(output: Any) -> str:
    """'GET <url> returned HTTP <status>.' (the URL after redirects); empty when the output is not ours."""
    if not isinstance(output, dict):
        return ""
    url, status = output.get("url"), output.get("status")
    if not isinstance(url, str) or not url or isinstance(status, bool) or not isinstance(status, int):
        return ""
    return f"GET {url} returned HTTP {status}."


def _ex(text: str, url: str) -> ToolExample:
    return ToolExample(text, {"url": url})


EXAMPLES = (
    _ex("Fetch https://example.com/status", "https://example.com/status"),
    _ex("GET http://127.0.0.1:8080/healthz", "http://127.0.0.1:8080/healthz"),
    _ex("Can you check https://status.example.com and tell me if it's up?", "https://status.example.com"),
    _ex("download https://docs.example.com/guide.html", "https://docs.example.com/guide.html"),
    _ex("What does https://api.example.com/v1/items return?", "https://api.example.com/v1/items"),
    _ex("Please retrieve the page at https://example.org/", "https://example.org/"),
    _ex("grab the JSON from https://api.example.com/users/42", "https://api.example.com/users/42"),
    _ex("fetch http://localhost:9153/metrics", "http://localhost:9153/metrics"),
    _ex("Show me what's at http://10.0.0.5/status", "http://10.0.0.5/status"),
    _ex("Check the status page https://status.example.net", "https://status.example.net"),
    _ex("open https://example.com/robots.txt and show me what it says", "https://example.com/robots.txt"),
    _ex("Make a GET request to https://httpbin.org/get", "https://httpbin.org/get"),
    _ex("Hit https://api.example.com/ping and tell me the response", "https://api.example.com/ping"),
    _ex("curl https://example.com/api/health", "https://example.com/api/health"),
    _ex("Is http://127.0.0.1:9152/metrics responding?", "http://127.0.0.1:9152/metrics"),
    _ex("what's on example.com/about", "https://example.com/about"),
    _ex("Read me the text of https://example.com/news/today", "https://example.com/news/today"),
    _ex(
        "Download the README from https://raw.githubusercontent.com/owner/repo/main/README.md",
        "https://raw.githubusercontent.com/owner/repo/main/README.md",
    ),
)

NEGATIVE_EXAMPLES = (
    "What is HTTP?",
    "Explain what a URL is",
    "What's the difference between GET and POST?",
    "What does a 404 error mean?",
    "How do I build a website?",
    "Why do websites go down?",
    "How does DNS work?",
    "What is SSRF?",
    "Recommend a good web browser",
    "Write an email to my landlord",
    "What port does the AgentMesh gateway listen on?",
)


def make_tool(
    allowlist: Sequence[str] = (),
    *,
    max_bytes: int = 256 * 1024,
    max_redirects: int = 3,
    timeout_s: float = 5.0,
) -> ToolDefinition:
    policy = Allowlist(allowlist)

    async def http_get(args: dict[str, Any]) -> dict[str, Any]:
        url = check_url(str(args["url"]), policy)
        connector = aiohttp.TCPConnector(resolver=CheckedResolver(policy), use_dns_cache=False, limit=4)
        async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
            for _ in range(max_redirects + 1):
                async with session.get(url, allow_redirects=False) as response:
                    if response.status in (301, 302, 303, 307, 308) and "Location" in response.headers:
                        url = check_url(urljoin(url, response.headers["Location"]), policy)
                        continue
                    body = bytearray()
                    async for chunk in response.content.iter_chunked(16 * 1024):
                        body.extend(chunk)
                        if len(body) > max_bytes:
                            raise ToolError(f"the response is larger than {max_bytes} bytes")
                    return {
                        "url": url,
                        "status": response.status,
                        "content_type": response.headers.get("Content-Type", ""),
                        "text": body.decode(response.charset or "utf-8", errors="replace"),
                    }
            raise ToolError(f"more than {max_redirects} redirects")

    return ToolDefinition(
        name="http_get",
        description="Fetch a web page or API response (GET) from an allowed host; returns status and text.",
        parameters={
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 2048,
                    "description": "the URL exactly as the user wrote it",
                    "x-agentmesh-copy": r"^https?://\S+$",
                    "x-agentmesh-copy-required": True,  # no URL in the message: nothing to fetch
                }
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        fn=http_get,
        timeout_s=timeout_s,
        cache_ttl_s=60.0,
        max_concurrency=8,
        examples=EXAMPLES,
        negative_examples=NEGATIVE_EXAMPLES,
        summarize=summarize,
    )
