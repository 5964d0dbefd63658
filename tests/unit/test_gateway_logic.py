"""Gateway logic on its own: API keys, bearer parsing, admission, the in-process rate limiter."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from gateway.admission import AdmissionController
from gateway.auth import ApiKeys, KeyFormatError, bearer_token
from gateway.ratelimit import Limits, MemoryRateLimiter
from services.runtime.errors import ResourceExhausted


def test_keys_from_file_and_env_are_stored_hashed(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"hashed-key-123").hexdigest()
    path = tmp_path / "keys"
    path.write_text(f"# tenants\nacme plain-key-123\nbeta sha256:{digest}  # pre-hashed\n")
    keys = ApiKeys.load(path, "gamma:env-key-1234")
    assert len(keys) == 3
    assert keys.tenant_for("plain-key-123") == "acme"
    assert keys.tenant_for("hashed-key-123") == "beta"
    assert keys.tenant_for("env-key-1234") == "gamma"
    assert keys.tenant_for("plain-key-12") is None and keys.tenant_for("") is None
    assert "plain-key-123" not in repr(keys.__dict__)


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("acme", "", "keys:1: expected 'tenant key'"),
        ("acme short", "", "keys:1: keys must be at least 8 characters"),
        ("acme sha256:zz", "", "keys:1: sha256 digest is not hex"),
        ("", "acme", "AGENTMESH_GATEWAY_API_KEYS item 1: expected tenant:key"),
    ],
)
def test_bad_key_files_name_the_line(tmp_path: Path, text: str, env: str, message: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(KeyFormatError, match=message):
        ApiKeys.load(path, env)


def test_bearer_parsing() -> None:
    assert bearer_token([("authorization", "Bearer abc")]) == "abc"
    assert bearer_token([("authorization", "bearer  abc ")]) == "abc"
    assert bearer_token([("authorization", "Basic abc")]) is None
    assert bearer_token([("x-other", "Bearer abc")]) is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_admission_serves_higher_classes_first() -> None:
    adm = AdmissionController({0: 10, 1: 10, 2: 10}, initial_limit=1, service_time_s=0.01)
    holder = await adm.acquire(1)
    order: list[int] = []

    async def wait(priority: int) -> None:
        ticket = await adm.acquire(priority)
        order.append(priority)
        adm.release(ticket)

    tasks = [asyncio.create_task(wait(p)) for p in (2, 1, 0, 2, 0)]
    await asyncio.sleep(0.01)
    assert adm.queued() == 5
    adm.release(holder)
    await asyncio.gather(*tasks)
    assert order == [0, 0, 1, 2, 2]
    assert adm.in_flight == 0


async def test_admission_sheds_when_the_expected_wait_breaks_the_slo() -> None:
    adm = AdmissionController({0: 5.0, 1: 5.0, 2: 1.5}, initial_limit=1, service_time_s=1.0)
    holder = await adm.acquire(1)
    queued_p2 = asyncio.create_task(adm.acquire(2))  # expected wait 1 s: fits 1.5 s
    await asyncio.sleep(0)
    with pytest.raises(ResourceExhausted, match=r"P2 request shed: expected queue wait 2\.0s"):
        await adm.acquire(2)  # second in line: 2 s > 1.5 s
    p0 = asyncio.create_task(adm.acquire(0))  # jumps ahead: the queued P2 no longer fits and is shed
    await asyncio.sleep(0)
    with pytest.raises(ResourceExhausted, match="shed for higher-priority traffic"):
        await queued_p2
    adm.release(holder)
    adm.release(await p0)


async def test_admission_drops_a_waiter_whose_client_left() -> None:
    adm = AdmissionController({0: 5, 1: 5, 2: 5}, initial_limit=1)
    holder = await adm.acquire(1)
    waiter = asyncio.create_task(adm.acquire(1))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert adm.queued() == 0
    adm.release(holder)
    assert adm.in_flight == 0


def test_limit_adapts_to_ttft() -> None:
    adm = AdmissionController({0: 1, 1: 1, 2: 1}, initial_limit=10, ttft_target_s=1.0)
    from gateway.admission import Ticket

    adm.in_flight = 2
    adm.release(Ticket(1, 0.0), ttft_s=3.0)
    assert adm.limit == pytest.approx(9.0)
    adm.release(Ticket(1, 0.0), ttft_s=0.2)
    assert adm.limit == pytest.approx(9.0 + 1 / 9.0)


async def test_memory_rate_limiter_rules() -> None:
    clock = Clock()
    limiter = MemoryRateLimiter(
        Limits(rps=1, burst=2, tokens_per_min=60, token_burst=100, window_s=10, window_max=3), clock=clock
    )
    assert (await limiter.check("t")).allowed and (await limiter.check("t")).allowed
    denied = await limiter.check("t")
    assert not denied.allowed and denied.retry_after_s == pytest.approx(1.0)
    clock.now += 1
    assert (await limiter.check("t")).allowed  # refilled one request
    clock.now += 5
    window = await limiter.check("t")  # bucket has room, the 10 s window (max 3) does not
    assert not window.allowed and window.retry_after_s == pytest.approx(4.0)
    await limiter.charge("u", 150)  # token bucket 100 - 150 = -50 → wait for 51 tokens at 1/s
    tokens = await limiter.check("u")
    assert not tokens.allowed and tokens.retry_after_s == pytest.approx(51.0)
