"""The OpenAI Responses API on the HTTP edge: ``POST /v1/responses``, ``GET``/``DELETE /v1/responses/{id}`` and
``GET /v1/responses/{id}/input_items``.

One code path with Chat Completions: a response is a Converse turn run through the typed client on the
gateway's own gRPC service, with the caller's key, so auth, rate limits, admission and priorities are the
gRPC path's. The state is the mesh's session log (``responses_store.py`` for the id → session, turn map):

- A response without ``previous_response_id`` is a new session (``instructions`` and system/developer items
  its system prompt; earlier items of ``input`` its client-kept ``history``).
- With ``previous_response_id`` (this tenant's, stored, its turn still in the log) the turn continues that
  session, from any gateway or router; when later turns already follow it in the session (a fork), a new
  session starts with the log's turns up to it as history. ``function_call_output`` items answer the
  ``function_call`` items the previous response ended at: the turn re-reads that turn's user message from
  the log and answers from the results (``prior_tool_calls``).
- Client ``function`` tools end the turn at their calls (``end_at_client_calls``), returned as
  ``function_call`` items. On ``agentmesh-agent`` the mesh's tools run in the mesh (``mcp_call`` items); on
  the plain model only the request's tools are offered. ``{"type": "mcp", "server_label": ...}`` names
  a server of the mesh's config (tool names ``<prefix>__<tool>`` in the tenant's ListTools; an optional
  ``allowed_tools`` keeps some of them): the turn is offered that server's tools (``allowed_mesh_tools``)
  beside the request's functions, on either model, instead of every tool of the mesh. A label the tenant
  has no tools from is a 400 naming ``tools[i].server_label``.
- ``store: false`` writes no record: the id cannot be retrieved or continued. ``DELETE`` removes the
  record; the session log keeps the turn (later responses continue from it) until the session expires.

Errors are OpenAI's shape through the edge's middleware; another tenant's id, an unknown one, a deleted one
and one whose session expired are all 404. A streaming caller that disconnects cancels the handler, which
closes the turn's Converse stream and so cancels the turn.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

from aiohttp import web

from agentmesh.agent.v1 import agent_pb2
from agentmesh_client import (
    AgentClient,
    ClientToolCalls,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnEvent,
    TurnStarted,
)
from gateway.openai_body import decode_body
from gateway.openai_errors import http_error
from gateway.openai_tools import SchemaChecks
from gateway.responses_request import (
    RESPONSE_ID,
    PreviousTurn,
    ResponseRequest,
    parse_response_request,
    renamed_chat_fields,
)
from gateway.responses_store import ResponseStore, StoredResponse
from gateway.responses_stream import MCP_SEPARATOR, Answer
from services.runtime.errors import AgentMeshError, InvalidArgument, NotFound, Unauthenticated, Unavailable

ClientFor = Callable[[web.Request], AgentClient]


class ResponsesEndpoint:
    """The Responses API's handlers (see module docstring), on the edge's app and client."""

    def __init__(
        self,
        store: ResponseStore,
        client_for: ClientFor,
        *,
        timeout_s: float,
        models: Sequence[str],
        max_tools: int,
        schemas: SchemaChecks,
    ) -> None:
        self._store = store
        self._client_for = client_for
        self._timeout_s = timeout_s
        self._models = tuple(models)
        self._max_tools = max_tools
        self._schemas = schemas

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/responses", self.create)
        router.add_get("/v1/responses/{id}", self.retrieve)
        router.add_delete("/v1/responses/{id}", self.delete)
        router.add_get("/v1/responses/{id}/input_items", self.input_items)

    # -- reading ---------------------------------------------------------------

    async def retrieve(self, request: web.Request) -> web.Response:
        client = self._client_for(request)
        stored = await self._stored(client, request, request.match_info["id"])
        return web.json_response(stored.response)

    async def delete(self, request: web.Request) -> web.Response:
        client = self._client_for(request)
        response_id = request.match_info["id"]
        await self._stored(client, request, response_id)
        await self._store.records.delete(await self._tenant(client, request), response_id)
        return web.json_response({"id": response_id, "object": "response", "deleted": True})

    async def input_items(self, request: web.Request) -> web.Response:
        client = self._client_for(request)
        stored = await self._stored(client, request, request.match_info["id"])
        order = request.query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise InvalidArgument.field("order", "asc or desc")
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            raise InvalidArgument.field("limit", "an integer from 1 to 100")
        items = stored.input_items if order == "asc" else stored.input_items[::-1]
        after = request.query.get("after")
        if after:
            ids = [item.get("id") for item in items]
            items = items[ids.index(after) + 1 :] if after in ids else []
        page = items[:limit]
        return web.json_response(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(items) > limit,
            }
        )

    async def _tenant(self, client: AgentClient, request: web.Request) -> str:
        """The caller's tenant, by the gateway's key table; a key it lacks gets the gRPC path's 401."""
        tenant = self._store.tenant(request.headers.get("Authorization", ""))
        if tenant is None:
            await client.list_tools()
            raise Unauthenticated("invalid API key")
        return tenant

    async def _stored(
        self, client: AgentClient, request: web.Request, response_id: str, *, field: str = ""
    ) -> StoredResponse:
        """This tenant's stored response ``response_id`` whose turn is still in the session log, else 404."""
        tenant = await self._tenant(client, request)
        stored = await self._store.records.get(tenant, response_id) if RESPONSE_ID.fullmatch(response_id) else None
        failed = stored is not None and stored.response.get("status") == "failed"
        if stored is not None and not failed and await self._turns_up_to(client, stored) is None:
            stored = None
        if stored is None:
            message = f"response {response_id[:80]!r} not found"
            if field:
                raise NotFound(f"{field}: {message}")
            raise NotFound(message)
        return stored

    async def _turns_up_to(self, client: AgentClient, stored: StoredResponse) -> tuple[agent_pb2.Session, int] | None:
        """The stored response's session, and its turn's index in it (None: the session or turn is gone)."""
        try:
            session = await client.get_session(stored.session_id, page_size=200)
        except NotFound:
            return None
        for k, turn in enumerate(session.turns):
            if turn.turn_id == stored.turn_id:
                return session, k
        return None

    # -- creating --------------------------------------------------------------

    async def create(self, request: web.Request) -> web.StreamResponse:
        client = self._client_for(request)
        authenticated = False
        try:
            body = decode_body(await request.read())
            headers = {k.lower(): v for k, v in request.headers.items()}
            req = parse_response_request(body, headers, max_tools=self._max_tools)
            if req.model not in self._models:
                raise NotFound(
                    f"model {req.model[:100]!r} does not exist; GET /v1/models lists them", reason="MODEL_NOT_FOUND"
                )
            allowed: list[str] = []
            if req.mcp_tools:
                authenticated = True
                allowed = await self._mcp_tools(client, req)
            if not authenticated and not self._schemas.known(req.tools):
                await client.list_tools()  # checking a schema costs CPU: only for a caller with a valid key
                authenticated = True
            try:
                self._schemas.check(req.tools)
            except InvalidArgument as exc:
                raise renamed_chat_fields(exc) from None
        except (InvalidArgument, NotFound):
            if not authenticated:
                await client.list_tools()  # a caller without a valid key learns that first
            raise
        tenant = await self._tenant(client, request)
        async with contextlib.aclosing(self._events(client, request, req, tenant, allowed)) as events:
            first = await anext(events, None)
            if isinstance(first, TurnCompleted) and first.error is not None:
                raise self._renamed(req, first.error)
            if not isinstance(first, TurnStarted):
                raise Unavailable("the mesh ended the request before accepting it")
            answer = Answer(self._skeleton(req))
            if req.stream:
                return await self._stream(request, req, tenant=tenant, started=first, answer=answer, events=events)
            return await self._whole(req, tenant, first, answer, events)

    async def _mcp_tools(self, client: AgentClient, req: ResponseRequest) -> list[str]:
        """The mesh tool names the request's ``mcp`` tools offer (each server's, or its ``allowed_tools``)."""
        by_server: dict[str, list[str]] = {}
        for spec in await client.list_tools():
            server, separator, _ = spec.name.partition(MCP_SEPARATOR)
            if separator:
                by_server.setdefault(server, []).append(spec.name)
        names: list[str] = []
        for tool in req.mcp_tools:
            if tool.server_label not in by_server:
                known = ", ".join(sorted(by_server)) or "none"
                raise InvalidArgument.field(
                    f"{tool.field}.server_label", f"no MCP server {tool.server_label!r} in the mesh (servers: {known})"
                )
            offered = by_server[tool.server_label]
            if tool.allowed_tools is not None:
                wanted = {f"{tool.server_label}{MCP_SEPARATOR}{name}" for name in tool.allowed_tools}
                missing = sorted(wanted - set(offered))
                if missing:
                    raise InvalidArgument.field(
                        f"{tool.field}.allowed_tools", f"server {tool.server_label!r} has no tool {missing[0]!r}"
                    )
                offered = [name for name in offered if name in wanted]
            names += [name for name in offered if name not in names]
        return names

    async def _events(
        self, client: AgentClient, request: web.Request, req: ResponseRequest, tenant: str, allowed: list[str]
    ) -> AsyncGenerator[TurnEvent, None]:
        """The turn's events, continuing the previous response's session (see module docstring)."""
        previous: PreviousTurn | None = None
        session_id = ""
        history: list[tuple[str, str]] = []
        system_prompt = ""
        if req.previous_response_id:
            field = "previous_response_id"
            stored = await self._stored(client, request, req.previous_response_id, field=field)
            found = await self._turns_up_to(client, stored)
            if found is None:
                raise NotFound(f"{field}: response {req.previous_response_id!r} not found")
            session, k = found
            turn = session.turns[k]
            calls = {
                item["call_id"]: (item["name"], item["arguments"])
                for item in stored.response.get("output", [])
                if item.get("type") == "function_call"
            }
            previous = PreviousTurn(turn.user_message, calls)
            if k == len(session.turns) - 1:
                session_id = stored.session_id
            else:  # later turns follow it: a new session from the log's turns up to it
                upto = session.turns[: k + 1] if turn.answer else session.turns[:k]
                history = [(t.user_message, t.answer) for t in upto if t.answer]
                system_prompt = session.system_prompt
        dialogue = req.dialogue(previous)
        try:
            async with client.conversation(session_id, timeout_s=self._timeout_s) as conversation:
                turn_events = client.turn(
                    conversation,
                    dialogue.message,
                    tools=req.turn_tool_choice,
                    priority=req.priority,
                    sampling=req.sampling,
                    system_prompt=dialogue.system_prompt or system_prompt,
                    max_tool_rounds=req.max_tool_rounds,
                    client_tools=req.specs(),
                    only_client_tools=bool(req.tools) and not req.agent and not allowed,
                    allowed_mesh_tools=allowed,
                    end_at_client_calls=bool(req.tools),
                    history=history or dialogue.history,
                    prior_tool_calls=req.prior_tool_calls(dialogue),
                    max_calls_per_round=req.calls_per_round,
                )
                async for event in turn_events:
                    yield event
        except AgentMeshError as exc:
            raise self._renamed(req, exc) from None

    @staticmethod
    def _renamed(req: ResponseRequest, error: AgentMeshError) -> AgentMeshError:
        if isinstance(error, InvalidArgument) and error.field_violations:
            return req.renamed(tuple(error.field_violations))
        return error

    def _skeleton(self, req: ResponseRequest) -> dict[str, Any]:
        sampling = req.sampling
        return {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": req.instructions,
            "max_output_tokens": sampling.max_tokens,
            "max_tool_calls": req.max_tool_calls,
            "model": req.model,
            "output": [],
            "parallel_tool_calls": req.parallel_tool_calls,
            "previous_response_id": req.previous_response_id or None,
            "reasoning": {"effort": None, "summary": None},
            "store": req.store,
            "temperature": sampling.temperature if sampling.temperature is not None else 0.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": req.tool_choice_echo,
            "tools": req.tools_echo,
            "top_p": sampling.top_p if sampling.top_p is not None else 1.0,
            "truncation": req.truncation,
            "usage": None,
            "metadata": req.metadata,
        }

    @staticmethod
    def _feed(answer: Answer, event: TurnEvent, client_side: set[str]) -> list[bytes]:
        if isinstance(event, TextDelta) and event.text:
            return answer.text(event.text)
        if isinstance(event, ClientToolCalls):
            return answer.client_calls(event.calls)
        if isinstance(event, ToolCallStarted):
            if event.client_side:
                client_side.add(event.call_id)
                return []
            return answer.mesh_call_started(event)
        if isinstance(event, ToolCallFinished) and event.call_id not in client_side:
            return answer.mesh_call_finished(event)
        return []

    async def _whole(
        self, req: ResponseRequest, tenant: str, started: TurnStarted, answer: Answer, events: AsyncIterator[TurnEvent]
    ) -> web.Response:
        client_side: set[str] = set()
        async for event in events:
            if isinstance(event, TurnCompleted):
                if event.error is not None:
                    raise self._renamed(req, event.error)
                answer.finish(event.finish_reason, event.usage)
                await self._keep(req, tenant, started, answer)
                return web.json_response(answer.snapshot())
            self._feed(answer, event, client_side)
        raise Unavailable("the mesh ended the answer before it finished")

    async def _stream(
        self,
        request: web.Request,
        req: ResponseRequest,
        *,
        tenant: str,
        started: TurnStarted,
        answer: Answer,
        events: AsyncIterator[TurnEvent],
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "X-Request-Id": started.request_id,
            }
        )
        await response.prepare(request)
        for chunk in answer.begin():
            await response.write(chunk)
        client_side: set[str] = set()
        chunks: list[bytes] = []
        try:
            async for event in events:
                if isinstance(event, TurnCompleted):
                    error = None if event.error is None else _error_body(self._renamed(req, event.error))
                    chunks = answer.finish(event.finish_reason, event.usage, error)
                    break
                for chunk in self._feed(answer, event, client_side):
                    await response.write(chunk)
            else:
                chunks = answer.fail(_error_body(Unavailable("the mesh ended the answer before it finished")))
        except AgentMeshError as exc:  # the response has begun: the failure goes in band
            chunks = answer.fail(_error_body(self._renamed(req, exc)))
        await self._keep(req, tenant, started, answer)
        for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
        return response

    async def _keep(self, req: ResponseRequest, tenant: str, started: TurnStarted, answer: Answer) -> None:
        """Store the finished response (unless ``store`` is false) before the caller learns its end."""
        if not req.store:
            return
        snapshot = answer.snapshot()
        stored = StoredResponse(started.session_id, started.turn_id, snapshot, _input_items(snapshot["id"], req.input))
        await self._store.records.put(tenant, snapshot["id"], stored, self._store.ttl_s)


def _error_body(error: AgentMeshError) -> dict[str, Any]:
    body = http_error(error).body["error"]
    return {"code": body["code"] or body["type"], "message": body["message"]}


def _input_items(response_id: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's input items as ``input_items`` lists them: each with an id and a type."""
    base = response_id.removeprefix("resp_")
    out = []
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        entry = {"id": item.get("id") or f"in_{base}_{i}", **item, "type": kind}
        if kind == "message" and isinstance(entry.get("content"), str):
            entry["content"] = [{"type": "input_text", "text": entry["content"]}]
        out.append(entry)
    return out
