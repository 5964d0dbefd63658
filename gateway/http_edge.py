"""The OpenAI-compatible HTTP edge: ``/v1/models`` and ``/v1/chat/completions`` in the gateway process.

The edge holds no policy of its own. Each HTTP request becomes a call, through the typed client
(``agentmesh_client``), to this gateway's own gRPC AgentService on loopback, carrying the caller's
``Authorization`` header and ``X-Request-Id``: API keys, per-tenant rate limits, priority admission and
shedding, token charging and router affinity are the gRPC path's code, run once, and an HTTP caller is
refused exactly when a gRPC caller would be (a request that fails validation is first checked for a
valid key the same way, so a caller without one gets 401, never a schema hint). The client never
retries here (``RetryPolicy.never``): the pushback goes back to the HTTP caller as ``Retry-After``.
The price is one loopback gRPC hop, measured in BENCHMARKS.md (``loadtest/http_edge.py``).

Model ``agentmesh-agent`` runs a Converse turn (server-side tools; tool events reported in the
``agentmesh`` field, see ``openai_response.py``; the session continues with ``X-AgentMesh-Session``);
the plain model (``completion_model``) is a Complete on the mesh's model, or a Converse turn without the
mesh's tools when the request brings a history or tools. A request with ``tools`` ends at the calls of
its own tools, which go back to the caller as OpenAI ``tool_calls`` (``openai_tools.py``); another model
name is 404 ``model_not_found``. The HTTP response starts only once the mesh has accepted the work
(TurnStarted / CompletionStarted), so refusals keep their status codes (``openai_errors.py``); a failure
after that ends a stream with an ``error`` event. Every input gets a 4xx in OpenAI's error shape or an
answer: the body is decoded strictly (``openai_body.py``), and anything the handlers did not expect is a
500 in the same shape, logged. aiohttp runs on the gateway's own (uv)loop; a caller that disconnects
cancels its handler, which cancels the gRPC call and with it the turn.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import replace

import grpc.aio
from aiohttp import web

from agentmesh_client import (
    AgentClient,
    ClientToolCalls,
    CompletionEvent,
    CompletionFinished,
    CompletionStarted,
    RetryPolicy,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    TurnCompleted,
    TurnEvent,
    TurnStarted,
    Usage,
)
from gateway.config import HTTP_MAX_TOOLS
from gateway.openai_body import decode_body
from gateway.openai_errors import http_error
from gateway.openai_request import AGENT_MODEL, SESSION_HEADER, ChatRequest, parse_chat_request
from gateway.openai_response import DONE, Reply, sse, tool_event
from gateway.openai_tools import SchemaChecks
from gateway.responses_api import ResponsesEndpoint
from gateway.responses_store import ResponseStore
from services.runtime.errors import AgentMeshError, InvalidArgument, NotFound, Unavailable

log = logging.getLogger(__name__)

Event = TurnEvent | CompletionEvent
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class HttpEdge:
    """The edge's aiohttp server, calling AgentService at ``grpc_target`` (see module docstring)."""

    def __init__(
        self,
        grpc_target: str,
        *,
        timeout_s: float,
        completion_model: str,
        max_tools: int = HTTP_MAX_TOOLS,
        responses: ResponseStore | None = None,
    ) -> None:
        self._channel = grpc.aio.insecure_channel(grpc_target)
        self._client = AgentClient(self._channel, retry=RetryPolicy.never())
        self._timeout_s = timeout_s
        self._models = (AGENT_MODEL, completion_model)
        self._max_tools = max_tools
        self._schemas = SchemaChecks()
        self._responses = responses
        self._runner: web.AppRunner | None = None
        self.port = 0

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors])
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/v1/models/{model}", self.model)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        if self._responses is not None:  # the Responses API (responses_api.py) needs its store
            ResponsesEndpoint(
                self._responses,
                self._client_for,
                timeout_s=self._timeout_s,
                models=self._models,
                max_tools=self._max_tools,
                schemas=self._schemas,
            ).add_routes(app.router)
        return app

    async def start(self, host: str, port: int, *, grace_s: float) -> None:
        self._runner = web.AppRunner(self.app(), handler_cancellation=True, access_log=None, shutdown_timeout=grace_s)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, shutdown_timeout=grace_s)
        await site.start()
        self.port = self._bound_port()
        log.info("OpenAI-compatible HTTP edge on http://%s:%d/v1", host, self.port)

    def _bound_port(self) -> int:
        assert self._runner is not None
        for address in self._runner.addresses:
            return int(address[1])
        raise RuntimeError("the HTTP edge is not listening")

    async def close(self) -> None:
        """Stop listening, give running requests the grace, then close the loopback channel."""
        if self._runner is not None:
            await self._runner.cleanup()
        await self._channel.close()

    # -- handlers --------------------------------------------------------------

    @web.middleware
    async def _errors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except AgentMeshError as exc:
            error = http_error(exc)
        except web.HTTPException as exc:  # unknown path or method, a body too large: the same error shape
            kind = NotFound if exc.status == 404 else InvalidArgument
            error = replace(http_error(kind(f"{request.method} {request.path}: {exc.reason}")), status=exc.status)
        except ConnectionError:  # the caller left: nobody to answer
            raise
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            error = http_error(AgentMeshError("internal error"))
        return web.json_response(error.body, status=error.status, headers=error.headers)

    async def models(self, request: web.Request) -> web.Response:
        await self._client_for(request).list_tools()  # authenticates the key, as every gRPC call does
        return web.json_response({"object": "list", "data": [self._model(m) for m in self._models]})

    async def model(self, request: web.Request) -> web.Response:
        await self._client_for(request).list_tools()
        name = request.match_info["model"]
        if name not in self._models:
            raise NotFound(f"model {name} does not exist; GET /v1/models lists them", reason="MODEL_NOT_FOUND")
        return web.json_response(self._model(name))

    @staticmethod
    def _model(name: str) -> dict[str, object]:
        return {"id": name, "object": "model", "created": 0, "owned_by": "agentmesh"}

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        client = self._client_for(request)
        authenticated = False
        try:
            body = decode_body(await request.read())
            headers = {k.lower(): v for k, v in request.headers.items()}
            chat = parse_chat_request(body, headers, max_tools=self._max_tools)
            if chat.model not in self._models:
                raise NotFound(
                    f"model {chat.model[:100]!r} does not exist; GET /v1/models lists them", reason="MODEL_NOT_FOUND"
                )
            if not self._schemas.known(chat.client_tools):
                await client.list_tools()  # checking a schema costs CPU: only for a caller with a valid key
                authenticated = True
            self._schemas.check(chat.client_tools)
        except (InvalidArgument, NotFound):
            if not authenticated:
                await client.list_tools()  # a caller without a valid key learns that first, from the gRPC path's auth
            raise
        async with contextlib.aclosing(self._events(client, chat)) as events:
            first = await anext(events, None)
            if isinstance(first, TurnCompleted) and first.error is not None:
                raise _renamed(chat, first.error)  # refused before it started: invalid, rate limit, shedding, ...
            if isinstance(first, TurnStarted):
                session = (first.session_id, first.turn_id) if chat.agent else ("", "")
                reply = Reply(chat.model, first.request_id, *session)
            elif isinstance(first, CompletionStarted):
                reply = Reply(chat.model, first.request_id)
            else:
                raise Unavailable("the mesh ended the request before accepting it")
            if chat.stream:
                return await self._stream(request, chat, reply, events)
            return await self._whole(chat, reply, events)

    # -- answers ---------------------------------------------------------------

    async def _whole(self, chat: ChatRequest, reply: Reply, events: AsyncIterator[Event]) -> web.Response:
        client_side: set[str] = set()
        async for event in events:
            if isinstance(event, TextDelta):
                reply.text.append(event.text)
            elif isinstance(event, ClientToolCalls):
                reply.calls.extend(event.calls)
            elif isinstance(event, ToolCallStarted | ToolCallFinished):
                if _mesh_side(event, client_side):
                    reply.tools.append(tool_event(event))
            elif isinstance(event, TurnCompleted | CompletionFinished):
                if isinstance(event, TurnCompleted) and event.error is not None:
                    raise _renamed(chat, event.error)
                return web.json_response(reply.completion(event.finish_reason, event.usage), headers=_headers(reply))
        raise Unavailable("the mesh ended the answer before it finished")

    async def _stream(
        self, request: web.Request, chat: ChatRequest, reply: Reply, events: AsyncIterator[Event]
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", **_headers(reply)}
        )
        await response.prepare(request)
        finished: tuple[str, Usage] | None = None
        client_side: set[str] = set()
        try:
            async for event in events:
                chunks: list[bytes] = []
                if isinstance(event, TextDelta) and event.text:
                    chunks = reply.text_chunks(event.text)
                elif isinstance(event, ClientToolCalls):
                    chunks = reply.call_chunks(event.calls)
                elif isinstance(event, ToolCallStarted | ToolCallProgress | ToolCallFinished):
                    if _mesh_side(event, client_side):
                        chunks = [reply.chunk(tool=tool_event(event))]
                elif isinstance(event, TurnCompleted) and event.error is not None:
                    chunks = [sse(http_error(_renamed(chat, event.error)).body)]
                elif isinstance(event, TurnCompleted | CompletionFinished):
                    finished = (event.finish_reason, event.usage)
                for chunk in chunks:
                    await response.write(chunk)
                if isinstance(event, TurnCompleted | CompletionFinished):
                    break
        except AgentMeshError as exc:  # the response has begun: the failure goes in band
            await response.write(sse(http_error(_renamed(chat, exc)).body))
        except ConnectionError:  # the caller left: nobody to tell
            raise
        except Exception:
            log.exception("the stream of %s failed", reply.id)
            await response.write(sse(http_error(AgentMeshError("internal error")).body))
        if finished is not None:
            for chunk in reply.finish_chunks(finished[0]):
                await response.write(chunk)
            if chat.include_usage:
                await response.write(reply.chunk(usage=finished[1]))
        await response.write(DONE)
        await response.write_eof()
        return response

    async def _events(self, client: AgentClient, chat: ChatRequest) -> AsyncGenerator[Event, None]:
        """The mesh's events for ``chat``, as the typed client yields them."""
        try:
            if chat.converse:
                session_id = chat.session_id if chat.agent else ""
                async with client.conversation(session_id, timeout_s=self._timeout_s) as conversation:
                    turn = client.turn(
                        conversation,
                        chat.message,
                        tools=chat.turn_tool_choice,
                        priority=chat.priority,
                        sampling=chat.sampling,
                        system_prompt=chat.system_prompt,
                        client_tools=chat.specs(),
                        only_client_tools=bool(chat.client_tools) and not chat.agent,
                        end_at_client_calls=bool(chat.client_tools),
                        history=chat.dialogue.history,
                        prior_tool_calls=chat.prior_tool_calls(),
                        max_calls_per_round=chat.max_calls_per_round,
                    )
                    async for event in turn:
                        yield event
            else:
                completions = client.complete(
                    chat.message,
                    system_prompt=chat.system_prompt,
                    sampling=chat.sampling,
                    priority=chat.priority,
                    timeout_s=self._timeout_s,
                )
                async for completion in completions:
                    yield completion
        except AgentMeshError as exc:
            raise _renamed(chat, exc) from None

    def _client_for(self, request: web.Request) -> AgentClient:
        """The client for one HTTP caller: its credentials and request id, passed on unchanged."""
        metadata: list[tuple[str, str]] = []
        auth = request.headers.get("Authorization", "")
        if auth and auth.isascii() and auth.isprintable():
            metadata.append(("authorization", auth))
        request_id = request.headers.get("X-Request-Id", "")
        if _REQUEST_ID.match(request_id):
            metadata.append(("x-request-id", request_id))
        return self._client.with_key("", metadata=tuple(metadata))


def _headers(reply: Reply) -> dict[str, str]:
    headers = {"X-Request-Id": reply.request_id}
    if reply.session_id:
        headers[SESSION_HEADER] = reply.session_id
    return headers


def _mesh_side(event: ToolCallStarted | ToolCallProgress | ToolCallFinished, client_side: set[str]) -> bool:
    """Whether ``event`` is of a call the mesh runs (reported in ``agentmesh``), not one of the client's."""
    if isinstance(event, ToolCallStarted) and event.client_side:
        client_side.add(event.call_id)
    return event.call_id not in client_side


def _renamed(chat: ChatRequest, error: AgentMeshError) -> AgentMeshError:
    """``error`` with the fields the mesh named (``start_turn.client_tools[2].name``) as this request's
    (``tools[2].function.name``)."""
    if not isinstance(error, InvalidArgument) or not error.field_violations:
        return error
    fields = chat.http_fields(tuple(error.field_violations))
    return InvalidArgument("; ".join(f"{v.field}: {v.description}" for v in fields), fields, reason=error.reason)
