"""``AgentClient``: AgentService for Python callers, without hand-driven stubs.

    async with AgentClient.connect("127.0.0.1:50051", api_key="...") as client:
        async for event in client.complete("What is the capital of France?"):
            ...
        async with client.conversation() as chat:
            async for event in chat.turn("What is 23*47?"):
                ...

Every call sends ``authorization: Bearer <api key>``, takes ``timeout_s`` (the call's deadline, shared
by its retries) and retries rejections by the server's pushback (``retry.py``). Failures raise the mesh's
own exception taxonomy (``services.runtime.errors``): ``ResourceExhausted`` with ``retry_after_s``,
``InvalidArgument`` with field violations, ``Unauthenticated``... ``with_key`` gives a client that shares
the channel under another key (the HTTP edge makes one per request).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

import grpc
import grpc.aio

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from agentmesh_client.client_tools import ToolHandler
from agentmesh_client.conversation import Conversation, ConverseCall, Turn
from agentmesh_client.events import CompletionEvent, completion_event_of
from agentmesh_client.options import PRIORITIES, Priority, Sampling, tool_choice
from agentmesh_client.retry import RetryPolicy, error_of_call
from services.runtime.channel import create_channel
from services.runtime.deadline import Deadline
from services.runtime.protoutil import duration

_Reply = TypeVar("_Reply")


class AgentClient:
    """An async client of AgentService on one channel (see module docstring)."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        api_key: str = "",
        retry: RetryPolicy | None = None,
        metadata: tuple[tuple[str, str], ...] = (),
        owns_channel: bool = False,
    ) -> None:
        self._channel = channel
        self._stub = agent_pb2_grpc.AgentServiceStub(channel)
        self._api_key = api_key
        self._extra = metadata
        self._retry = retry or RetryPolicy()
        self._owns_channel = owns_channel

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        api_key: str = "",
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> AgentClient:
        """A client on its own channel to ``target`` (gzip, keepalive; TLS with ``credentials``)."""
        if credentials is not None:
            channel = grpc.aio.secure_channel(target, credentials, compression=grpc.Compression.Gzip)
        else:
            channel = create_channel(target)
        return cls(channel, api_key=api_key, retry=retry, owns_channel=True)

    def with_key(self, api_key: str, *, metadata: tuple[tuple[str, str], ...] = ()) -> AgentClient:
        """A client on the same channel that authenticates as ``api_key`` (the channel stays this client's)."""
        return AgentClient(self._channel, api_key=api_key, retry=self._retry, metadata=metadata)

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_channel:
            await self._channel.close()

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        auth = (("authorization", f"Bearer {self._api_key}"),) if self._api_key else ()
        return (*auth, *self._extra)

    # -- Complete ------------------------------------------------------------

    async def complete(
        self,
        prompt: str,
        *,
        system_prompt: str = "",
        sampling: Sampling | None = None,
        priority: Priority = "P1",
        timeout_s: float | None = None,
    ) -> AsyncIterator[CompletionEvent]:
        """Stream a one-shot answer: CompletionStarted, TextDelta..., CompletionFinished."""
        request = agent_pb2.CompleteRequest(prompt=prompt, system_prompt=system_prompt, priority=PRIORITIES[priority])
        if sampling is not None:
            request.sampling.CopyFrom(sampling.to_proto())
        deadline = Deadline.after(timeout_s)
        attempt = 0
        while True:
            call = self._stub.Complete(request, metadata=self.metadata, timeout=deadline.timeout())
            received = False
            try:
                async for message in call:
                    received = True
                    event = completion_event_of(message)
                    if event is not None:
                        yield event
                return
            except grpc.aio.AioRpcError as exc:
                error = error_of_call(exc)
                wait = None if received else self._retry.delay(error, attempt, deadline.remaining())
                if wait is None:
                    raise error from None
            finally:
                call.cancel()  # a no-op once the call ended; stops the answer when the caller stops reading
            await asyncio.sleep(wait)
            attempt += 1

    # -- Converse ------------------------------------------------------------

    def conversation(
        self, session_id: str = "", *, create: bool = False, timeout_s: float | None = None
    ) -> Conversation:
        """A session on one Converse stream lasting at most ``timeout_s``: new (the server names it), or
        ``session_id`` continued, or with ``create`` a new one named ``session_id`` (the first turn fails
        with AlreadyExists if the tenant has it)."""

        def open_call(timeout: float | None) -> ConverseCall:
            return self._stub.Converse(metadata=self.metadata, timeout=timeout)

        return Conversation(open_call, self._retry, session_id, Deadline.after(timeout_s), create=create)

    def turn(
        self,
        conversation: Conversation,
        message: str,
        *,
        tools: str = "auto",
        priority: Priority = "P1",
        sampling: Sampling | None = None,
        system_prompt: str = "",
        max_tool_rounds: int = 0,
        timeout_s: float | None = None,
        turn_id: str = "",
        client_tools: Sequence[common_pb2.ToolSpec] = (),
        tool_handler: ToolHandler | None = None,
        only_client_tools: bool = False,
        end_at_client_calls: bool = False,
        history: Sequence[tuple[str, str]] = (),
        prior_tool_calls: Sequence[agent_pb2.PriorToolCall] = (),
        max_calls_per_round: int = 0,
        allowed_mesh_tools: Sequence[str] = (),
    ) -> Turn:
        """A turn of ``conversation`` with every StartTurn option: ``tools`` is auto, none, required or a
        tool's name; ``timeout_s`` is the turn's own time limit (it ends ``aborted``, the stream lives on).

        ``client_tools`` (``client_tool(...)``) are run by the caller: by ``tool_handler`` as their calls
        arrive, or answered with ``Turn.submit_tool_results``; ``end_at_client_calls`` ends the turn at them
        instead (``tool_calls``), for a caller that sends their results with its next turn as
        ``prior_tool_calls``; ``history`` holds the (user, answer) turns of a conversation the caller keeps;
        ``allowed_mesh_tools`` offers only those of the mesh's tools (``list_tools`` names them).
        """
        start = agent_pb2.StartTurn(
            tool_choice=tool_choice(tools),
            priority=PRIORITIES[priority],
            system_prompt=system_prompt,
            max_tool_rounds=max_tool_rounds,
            client_tools=client_tools,
            only_client_tools=only_client_tools,
            end_at_client_calls=end_at_client_calls,
            history=[agent_pb2.HistoryTurn(user_message=u, answer=a) for u, a in history],
            prior_tool_calls=prior_tool_calls,
            max_calls_per_round=max_calls_per_round,
            allowed_mesh_tools=allowed_mesh_tools,
        )
        if sampling is not None:
            start.sampling.CopyFrom(sampling.to_proto())
        if timeout_s is not None:
            start.timeout.CopyFrom(duration(timeout_s))
        return conversation.turn(message, start=start, turn_id=turn_id, tool_handler=tool_handler)

    # -- unary ---------------------------------------------------------------

    async def get_session(
        self, session_id: str, *, page_size: int = 0, timeout_s: float | None = 10.0
    ) -> agent_pb2.Session:
        """A session's whole history, oldest turn first (NotFound for an unknown session or another tenant's).

        The server returns pages (``page_size`` turns each, 0: its default); this follows
        ``next_page_token`` and returns one ``Session`` with every turn, each page its own call
        with its own ``timeout_s``.
        """
        session = agent_pb2.Session()
        turns: list[agent_pb2.Turn] = []
        token = ""
        while True:
            request = agent_pb2.GetSessionRequest(session_id=session_id, page_size=page_size, page_token=token)

            def send(
                t: float | None, r: agent_pb2.GetSessionRequest = request
            ) -> grpc.aio.UnaryUnaryCall[agent_pb2.GetSessionRequest, agent_pb2.GetSessionResponse]:
                return self._stub.GetSession(r, metadata=self.metadata, timeout=t)

            reply = await self._unary(send, timeout_s)
            session.CopyFrom(reply.session)
            turns += reply.session.turns
            token = reply.next_page_token
            if not token:
                del session.turns[:]
                session.turns.extend(turns)
                return session

    async def list_tools(self, *, timeout_s: float | None = 10.0) -> list[common_pb2.ToolSpec]:
        """The tools the agent may call."""
        reply = await self._unary(
            lambda t: self._stub.ListTools(agent_pb2.ListToolsRequest(), metadata=self.metadata, timeout=t),
            timeout_s,
        )
        return list(reply.tools)

    async def _unary(self, send: Callable[[float | None], Awaitable[_Reply]], timeout_s: float | None) -> _Reply:
        deadline = Deadline.after(timeout_s)
        attempt = 0
        while True:
            try:
                return await send(deadline.timeout())
            except grpc.aio.AioRpcError as exc:
                error = error_of_call(exc)
                wait = self._retry.delay(error, attempt, deadline.remaining())
                if wait is None:
                    raise error from None
            await asyncio.sleep(wait)
            attempt += 1
