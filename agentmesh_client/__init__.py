"""The typed async Python client of AgentMesh's AgentService (see ``client.py`` and the README)."""

from agentmesh_client.client import AgentClient
from agentmesh_client.client_tools import ClientToolResult, ToolHandler, client_tool
from agentmesh_client.conversation import Conversation, Turn, TurnResult
from agentmesh_client.events import (
    ClientToolCall,
    ClientToolCalls,
    CompletionEvent,
    CompletionFinished,
    CompletionStarted,
    Draining,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    TurnCompleted,
    TurnEvent,
    TurnStarted,
    Usage,
)
from agentmesh_client.options import Priority, Sampling
from agentmesh_client.retry import RetryPolicy

__all__ = [
    "AgentClient",
    "ClientToolCall",
    "ClientToolCalls",
    "ClientToolResult",
    "CompletionEvent",
    "CompletionFinished",
    "CompletionStarted",
    "Conversation",
    "Draining",
    "Priority",
    "RetryPolicy",
    "Sampling",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolHandler",
    "Turn",
    "TurnCompleted",
    "TurnEvent",
    "TurnResult",
    "TurnStarted",
    "Usage",
    "client_tool",
]
