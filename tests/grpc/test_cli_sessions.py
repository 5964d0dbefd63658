"""``agentmesh chat --once`` with session ids, and ``agentmesh sessions show``, against a real in-process mesh."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from meshkit.mesh import FAST_SIM, Mesh, start_mesh
from services.cli import chat, sessions
from tests.support.processes import ROOT


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=1, sim=FAST_SIM)
    await m.add_router(response_cache_ttl_s=0)
    yield m
    await m.close()


@pytest.fixture
async def gateway(mesh: Mesh) -> str:
    _, _, server = await mesh.add_gateway(rate_limit_backend="memory", rate_rps=1000.0, rate_burst=1000.0)
    return server.address


def chat_args(target: str, message: str, *, key: str = "acme-secret-key", **kwargs: Any) -> argparse.Namespace:
    fields = {"session": "", "new_session": "", "tool_choice": "none", **kwargs}
    return argparse.Namespace(target=target, api_key=key, priority="P1", once=message, **fields)


async def once(target: str, message: str, **kwargs: Any) -> tuple[str, str]:
    """One ``chat --once``: (stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    await chat.chat(chat_args(target, message, **kwargs), out, err)
    return out.getvalue(), err.getvalue()


async def show(target: str, session_id: str, *, key: str = "acme-secret-key", as_json: bool = False) -> str:
    out = io.StringIO()
    args = argparse.Namespace(target=target, api_key=key, session_id=session_id, json=as_json)
    await sessions.show(args, out)
    return out.getvalue()


async def test_once_prints_the_session_id_on_stderr_and_session_continues_it(gateway: str) -> None:
    out, err = await once(gateway, "my name is Ada")
    assert err.startswith("agentmesh: session ") and err.count("\n") == 1  # one line, and only on stderr
    session_id = err.removeprefix("agentmesh: session ").strip()
    assert len(session_id) == 32 and session_id not in out
    out2, err2 = await once(gateway, "what is my name?", session=session_id)
    assert err2 == err and "completion tokens" in out2
    text = await show(gateway, session_id)
    assert text.startswith(f"session {session_id}: 2 turns, created ")
    assert "[1] you> my name is Ada\n" in text and "[2] you> what is my name?\n" in text
    assert text.count("completion tokens") == 2
    whole = json.loads(await show(gateway, session_id, as_json=True))
    assert [t["userMessage"] for t in whole["turns"]] == ["my name is Ada", "what is my name?"]


async def test_new_session_creates_the_callers_id_once_per_tenant(gateway: str) -> None:
    out, err = await once(gateway, "hello", new_session="ada-1")
    assert err == "agentmesh: session ada-1\n" and "completion tokens" in out
    with pytest.raises(chat.CliError, match=r"^ALREADY_EXISTS: session ada-1 already exists"):
        await once(gateway, "hello again", new_session="ada-1")
    await once(gateway, "and on", session="ada-1")
    # Another tenant's "ada-1" is its own session; it never sees acme's.
    await once(gateway, "bonjour", new_session="ada-1", key="other-secret-key")
    assert "[1] you> bonjour\n" in await show(gateway, "ada-1", key="other-secret-key")
    acme = await show(gateway, "ada-1")
    assert "bonjour" not in acme and "[1] you> hello\n" in acme and "[2] you> and on\n" in acme
    with pytest.raises(chat.CliError, match=r"^INVALID_ARGUMENT: start_turn.session_id: a new session's id"):
        await once(gateway, "hi", new_session="ünï")
    with pytest.raises(chat.CliError, match=r"^NOT_FOUND: session nobody-has-this not found"):
        await once(gateway, "hi", session="nobody-has-this")
    with pytest.raises(chat.CliError, match=r"^NOT_FOUND: session nobody-has-this not found"):
        await show(gateway, "nobody-has-this")


async def test_a_shell_script_holds_a_conversation_with_chat_once(gateway: str) -> None:
    """The README's scripted conversation, run by bash with the real ``agentmesh`` entry point."""
    script = """
set -euo pipefail
agentmesh() { "$PYTHON" -m services.cli "$@" --target "$TARGET"; }
sid=$(agentmesh chat --once "My name is Ada." --tool-choice none 2>&1 >/dev/null | sed -n 's/^agentmesh: session //p')
agentmesh chat --once "What is 6*7?" --session "$sid" --tool-choice calculator >/dev/null 2>&1
agentmesh sessions show "$sid"
"""
    env = {**os.environ, "PYTHON": sys.executable, "TARGET": gateway, "AGENTMESH_API_KEY": "acme-secret-key"}
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", script, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, stderr.decode()
    shown = stdout.decode()
    assert ": 2 turns, created " in shown and "[1] you> My name is Ada.\n" in shown
    assert "[2] you> What is 6*7?\n" in shown and "  ← calculator ok" in shown and '"result":42' in shown
