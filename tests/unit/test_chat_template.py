"""Tool messages through real chat templates: SmolLM2's has a tool role; a strict one gets the fallback."""

from __future__ import annotations

from typing import Any

import pytest
from transformers import AutoTokenizer

from services.inference.chat import supports_tool_role, template_messages, without_tool_role
from services.inference.config import default_model_dir
from services.inference.engine import ChatTurn

#: The shape of Gemma's template: only user and model turns, strictly alternating; anything else raises.
STRICT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] not in ['system', 'user', 'assistant'] %}{{ raise_exception('unknown role') }}{% endif %}"
    "{% if m['role'] != 'system' and (m['role'] == 'user') != (loop.index0 % 2 == (1 if messages[0]['role'] == "
    "'system' else 0)) %}{{ raise_exception('roles must alternate') }}{% endif %}"
    "<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>"
    "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
)
#: A template that silently drops roles it does not know.
DROPPING_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] in ['system', 'user', 'assistant'] %}"
    "<{{ m['role'] }}>{{ m['content'] }}{% endif %}{% endfor %}"
)

TURNS = [
    ChatTurn("system", "Be brief."),
    ChatTurn("user", "What is 23*47 and the time in Tokyo?"),
    ChatTurn("tool", 'calculator({"expression":"23*47"}) returned {"result":1081}', "calculator"),
    ChatTurn("tool", 'clock({"timezone":"Asia/Tokyo"}) returned {"time":"14:03"}', "clock"),
]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(default_model_dir())


def test_smollm2_renders_tool_messages_with_its_own_tool_role(tokenizer: Any) -> None:
    assert supports_tool_role(tokenizer)
    text = tokenizer.apply_chat_template(
        template_messages(TURNS, tool_role=True), tokenize=False, add_generation_prompt=True
    )
    assert '<|im_start|>tool\ncalculator({"expression":"23*47"}) returned {"result":1081}<|im_end|>' in text
    assert text.count("<|im_start|>system") == 1  # never a system message mid-conversation


@pytest.mark.parametrize("template", [STRICT_TEMPLATE, DROPPING_TEMPLATE])
def test_templates_without_a_tool_role_get_results_as_user_content(tokenizer: Any, template: str) -> None:
    strict = AutoTokenizer.from_pretrained(default_model_dir())
    strict.chat_template = template
    assert not supports_tool_role(strict)
    messages = template_messages([*TURNS, ChatTurn("assistant", "23*47 = 1081.")], tool_role=False)
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    text = strict.apply_chat_template(messages, tokenize=False, continue_final_message=True)
    assert "Result of calculator:" in text and "Result of clock:" in text and "14:03" in text


def test_fallback_merges_consecutive_messages_of_one_role() -> None:
    merged = without_tool_role(TURNS)
    assert [t.role for t in merged] == ["system", "user"]
    assert merged[1].content.startswith("What is 23*47 and the time in Tokyo?\n\nResult of calculator: ")
