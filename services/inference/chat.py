"""Chat prompts to token ids with the model's own chat template, tool messages included.

Tool results reach the engine as ``tool`` messages (``ROLE_TOOL``). Templates
with a tool role (ChatML ones such as SmolLM2's and Qwen's, Llama 3's) render
them as they were trained to. Templates without one either raise (Gemma and
Mistral insist on user/assistant alternation) or silently drop the message.
Which kind a tokenizer has is probed once, by rendering a tool message that
carries a marker and looking for the marker in the output.

The documented rendering for templates without a tool role: each tool message
becomes a user message ``Result of <tool>: <content>``, and consecutive messages
of the same role are merged (joined by a blank line), so the conversation still
alternates and no template sees a role it does not know. System messages stay
where the caller put them (the router only sends one, first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.inference.engine import ChatTurn

_MARKER = "agentmesh-tool-role-probe-7f3a"


def supports_tool_role(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template renders ``tool`` messages (probed, not guessed from names)."""
    probe = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "content": _MARKER, "name": "probe"},
    ]
    try:
        text = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    except Exception:
        return False
    return isinstance(text, str) and _MARKER in text


def without_tool_role(turns: Sequence[ChatTurn]) -> list[ChatTurn]:
    """The fallback rendering (see module docstring): tool results as user messages, same roles merged."""
    out: list[ChatTurn] = []
    for original in turns:
        turn = original
        if turn.role == "tool":
            turn = ChatTurn("user", f"Result of {turn.tool_name or 'the tool'}: {turn.content}")
        if out and out[-1].role == turn.role and turn.role != "system":
            out[-1] = ChatTurn(turn.role, f"{out[-1].content}\n\n{turn.content}")
        else:
            out.append(turn)
    return out


def template_messages(turns: Sequence[ChatTurn], *, tool_role: bool) -> list[dict[str, str]]:
    """The messages handed to ``apply_chat_template``."""
    if not tool_role and any(t.role == "tool" for t in turns):
        turns = without_tool_role(turns)
    messages = []
    for t in turns:
        message = {"role": t.role, "content": t.content}
        if t.role == "tool" and t.tool_name:
            message["name"] = t.tool_name
        messages.append(message)
    return messages
