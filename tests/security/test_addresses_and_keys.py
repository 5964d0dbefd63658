"""Defects of issue 14 that need no server: SSRF address forms, session-key injectivity, tenant names, sampling."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from opentelemetry import baggage
from opentelemetry.sdk.trace.sampling import Decision

from gateway.auth import ApiKeys, KeyFormatError
from services.router.sessions.store import session_keys
from services.runtime.errors import InvalidArgument
from services.runtime.sampling import SAMPLE_BAGGAGE, BaggageSampler
from services.runtime.tenancy import TENANT_BAGGAGE
from services.tools.builtin.http_get import Allowlist

METADATA = "169.254.169.254"
# Forms of the cloud metadata address (and of loopback) that route to it through a translator or relay.
DISGUISED = [
    "64:ff9b::a9fe:a9fe",  # NAT64 (RFC 6052): Python 3.11 calls it global
    "64:ff9b:1::a9fe:a9fe",  # local-use NAT64 (RFC 8215)
    "2002:a9fe:a9fe::1",  # 6to4: Python 3.11 calls it global
    "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo, client 169.254.169.254 (bits inverted)
    "::ffff:169.254.169.254",  # IPv4-mapped
    "::169.254.169.254",  # IPv4-compatible (deprecated), global to Python 3.11
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
]


@pytest.mark.parametrize("address", DISGUISED)
def test_ipv4_in_ipv6_forms_of_private_addresses_are_refused(address: str) -> None:
    assert not Allowlist([]).address_allowed(ipaddress.ip_address(address))


def test_forms_of_public_addresses_still_pass_and_allowlisted_networks_see_through_them() -> None:
    allow = Allowlist(["10.0.0.0/8"])
    assert allow.address_allowed(ipaddress.ip_address("64:ff9b::808:808"))  # NAT64 of 8.8.8.8
    assert allow.address_allowed(ipaddress.ip_address("2606:4700::1111"))  # plain global IPv6
    assert allow.address_allowed(ipaddress.ip_address("::ffff:10.1.2.3"))  # mapped, inside the allowlist
    assert allow.host_allowed("::ffff:10.1.2.3") and not allow.host_allowed("::ffff:169.254.169.254")
    assert not allow.address_allowed(ipaddress.ip_address(METADATA))


def test_session_keys_are_injective_even_when_session_ids_hold_colons() -> None:
    # Old keys {tenant:session}: ("a:b", "c") and ("a", "b:c") were the same key.
    pairs = [("a", "b:c"), ("a:b", "c"), ("acme", "x"), ("acme", "x:y")]
    seen: dict[tuple[str, str, str], tuple[str, str]] = {}
    for tenant, session in pairs:
        try:
            keys = session_keys("s:", tenant, session)
        except ValueError:
            assert ":" in tenant  # such a tenant cannot exist (names are checked where keys are loaded)
            continue
        assert keys not in seen, f"{(tenant, session)} and {seen[keys]} share {keys}"
        seen[keys] = (tenant, session)
    with pytest.raises(InvalidArgument, match="braces"):
        session_keys("s:", "acme", "x}{y")


@pytest.mark.parametrize("name", ["a:b", "a b", "{acme}", "", "x" * 65, "tenant\n"])
def test_tenant_names_are_checked_when_keys_load(name: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"{name} a-long-enough-key\n")
    with pytest.raises(KeyFormatError, match="tenant"):
        ApiKeys.load(keys if name.strip() and " " not in name else None, f"{name}:a-long-enough-key")


def test_baggage_forces_sampling_of_a_request_or_a_tenant() -> None:
    sampler = BaggageSampler(0.0, forced_tenants=["acme"])
    assert sampler.should_sample(None, 1, "x").decision is Decision.DROP
    forced = baggage.set_baggage(SAMPLE_BAGGAGE, "1")
    assert sampler.should_sample(forced, 1, "x").decision is Decision.RECORD_AND_SAMPLE
    tenant = baggage.set_baggage(TENANT_BAGGAGE, "acme")
    assert sampler.should_sample(tenant, 1, "x").decision is Decision.RECORD_AND_SAMPLE
    other = baggage.set_baggage(TENANT_BAGGAGE, "other")
    assert sampler.should_sample(other, 1, "x").decision is Decision.DROP
