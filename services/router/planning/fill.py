"""Fill: each chosen tool's arguments, written under its schema, then grounded.

In: the chosen tools (each with the clause that asked for it) and the turn.
Out: ``PlannedCall``s. One schema-constrained generation per tool, all
concurrent (the replica batches them) — or none, when the copy-constrained
schema leaves one choice (one place, one URL, the question as a search query:
``determined``). The worked examples are the tool's own calls nearest
the message in shape (a tool described only gets none: the call built from its
card taught the model to copy the card's values — it is kept for the LLM
judge's worked decisions); a follow-up of the tool that ran last turn gets that call
as its nearest example. A fill that does not parse, or whose required values
the conversation does not ground (``grounding.ground``), is dropped and
counted, never run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from agentmesh.common.v1 import common_pb2
from services.router.metrics import RouterMetrics, count_dropped
from services.router.planning.candidates import CardIndex
from services.router.planning.copying import copy_constrained
from services.router.planning.formats import complete
from services.router.planning.grounding import ground
from services.router.planning.inputs import PlanInput, PlannedCall, context, resolved
from services.router.planning.prompts import FILL_EXAMPLES, fill_messages, parse_arguments, worked_examples
from services.router.planning.structured import Structured
from services.router.turn.progress import TurnCounters
from services.runtime.language import Language

log = logging.getLogger(__name__)


class Filler:
    """Writes the arguments of chosen tools (one concurrent generation each, or none when determined)."""

    def __init__(
        self,
        structured: Structured,
        language: Language,
        index: CardIndex | None = None,
        *,
        max_tokens: int = 160,
        metrics: RouterMetrics | None = None,
    ) -> None:
        self._structured = structured
        self._language = language
        self._index = index
        self._max_tokens = max_tokens
        self._metrics = metrics

    async def fill(
        self,
        specs: Sequence[common_pb2.ToolSpec],
        names: Sequence[str],
        segments: dict[str, str],
        turn: PlanInput,
        counters: TurnCounters,
    ) -> list[PlannedCall]:
        """Arguments for each named tool, filled concurrently; unparseable or ungrounded fills are dropped."""
        by_name = {t.name: t for t in specs}
        previous = {name: args for name, args in turn.previous_calls}
        full = context(turn, list(names), self._language)

        async def fill_one(name: str) -> tuple[str, str]:
            """The text the tool was asked with, and its generated (or determined) arguments."""
            tool = by_name[name]
            text, told = resolved(segments.get(name, turn.message), turn, full, self._language)
            schema = copy_constrained(
                tool.parameters_json_schema, text, told, implied=not tool.examples, tool_name=tool.name
            )
            known = determined(schema, open_choices=not tool.examples)
            if known is not None:  # the grammar leaves one choice: nothing for a generation to decide
                return text, json.dumps(known)
            # A described tool's fill gets no worked call: the one built from its card
            # taught the 135M model to copy the card's values (dev: 27/65 exact without, 24/61 with)
            examples = worked_examples(tool)
            shots: list[tuple[str, dict[str, Any]]] | None = None
            if self._index is not None:  # nearest in meaning beats nearest in words (EVAL.md)
                shots = await self._index.nearest(text, examples, FILL_EXAMPLES)
            if told and name in previous:  # the last call of this tool is the nearest example of all
                shots = [*(shots or [])[1:], (turn.previous_message, previous[name])]
            messages = fill_messages(tool, text, told, shots, self._language)
            return text, await self._structured(messages, schema, turn.priority, counters, self._max_tokens)

        filled = await asyncio.gather(*(fill_one(name) for name in names))
        calls = []
        for name, (asked, text) in zip(names, filled, strict=True):
            arguments = parse_arguments(text)
            if arguments is None:
                count_dropped(self._metrics, "unparseable")
                continue
            if not by_name[name].examples:  # a date or address the user wrote reaches its property
                arguments = complete(by_name[name].parameters_json_schema, arguments, asked, name)
            checked = ground(
                arguments, by_name[name].parameters_json_schema, turn.message, full, language=self._language
            )
            if checked.arguments is None:
                count_dropped(self._metrics, "ungrounded")
                log.warning("dropped planned call %s%s: %s", name, arguments, "; ".join(checked.invented))
                continue
            if checked.invented:
                log.info("planned call %s: left out %s", name, "; ".join(checked.invented))
            calls.append(PlannedCall(name, checked.arguments))
        return calls


def determined(schema_json: str, *, open_choices: bool = False) -> dict[str, Any] | None:
    """The arguments when the (copy-constrained) schema leaves one choice for every required property, else None.

    Then a generation could only write what the grammar forces, so the fill skips it: a search query copied
    whole, a place named once. Optional properties are left to the tool's defaults. ``open_choices`` (a tool
    described only): an optional property offered two options or more is a choice left to make ("merged PRs in
    acme/billing by kdiaz": the repository is determined, the author is not).
    """
    schema = json.loads(schema_json)
    props = schema.get("properties", {})
    required = schema.get("required", [])
    optional = [p for n, p in props.items() if n not in required and isinstance(p, dict)]
    if not required or (open_choices and any(len(p.get("enum", ())) > 1 for p in optional)):
        return None
    out: dict[str, Any] = {}
    for name in required:
        options = props.get(name, {}).get("enum") if isinstance(props.get(name), dict) else None
        if not isinstance(options, list) or len(options) != 1:
            return None
        out[name] = options[0]
    return out
