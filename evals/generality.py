"""The generality eval's own parts: its prompts without the catalog loaded, and what that run must show.

The catalog's prompts are also run through a router whose tool executor has
only the built-ins (mode ``embedding, no catalog``): a prompt for a tool that
is not there must not be taken by a built-in, and a built-in that does run must
not carry a value the conversation never said (the invented-argument failure:
a stock ask run as ``1000*1000``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from evals.cases import ARG_FIELDS, Case
from evals.records import TurnRecord
from evals.summary import Ratio, Report

#: The label of the run without the catalog.
BARE = ", no catalog"
#: The label of the run with the catalog brought by the client (StartTurn.client_tools), not served by the mesh.
CLIENT = ", client tools"
#: The label of the run with the catalog served by an MCP server (``evals/catalog_mcp_server.py``) over stdio.
MCP = ", MCP server"
BUILTINS = frozenset(ARG_FIELDS)

GENERALITY_ABOUT = (
    "The catalog (`evals/generality/catalog.json`) is tools as a user registers them from an MCP server or an "
    "OpenAI `tools` list: a name, a description and a JSON schema, no examples, no near misses, no "
    "`x-agentmesh-*` hints. They are registered beside the five built-ins; a call is recorded, not performed. "
    "The prompts were written by someone who had read only the tool descriptions and the case schema, not the "
    "planning code (`evals/generality/README.md`). Arguments are scored on the values the message states "
    "(a value, one of several, or a phrase a free-text field must contain). Its answers are cut at 24 tokens "
    "(they are not scored), so its latencies are planning plus a short answer."
)


def without_catalog(cases: Sequence[Case]) -> list[Case]:
    """The cases as the built-ins alone should answer them: a catalog tool expected is no tool at all."""
    out = []
    for case in cases:
        turns = tuple(
            replace(
                t,
                tools=frozenset(t.tools & BUILTINS),
                args={k: v for k, v in t.args.items() if k in BUILTINS},
                answer=None,
            )
            for t in case.turns
        )
        out.append(replace(case, turns=turns))
    return out


_TOKEN = re.compile(r"[A-Za-z]{2,}|\d+(?:\.\d+)?")


def _values(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [v for x in value.values() for v in _values(x)]
    if isinstance(value, list):
        return [v for x in value for v in _values(x)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


def invented_tokens(arguments_json: str, conversation: str) -> list[str]:
    """Words and numbers of a call's argument values that appear nowhere in the conversation (case-insensitive;
    a number also counts as said when the conversation writes it with thousands separators)."""
    try:
        arguments = json.loads(arguments_json or "{}")
    except json.JSONDecodeError:
        return ["<unparseable arguments>"]
    said = conversation.casefold().replace(",", "")
    return [t for v in _values(arguments) for t in _TOKEN.findall(v) if t.casefold() not in said]


def bare_section(bare: Report, original: Sequence[Case], *, show_heldout: bool = False) -> str:
    """The run without the catalog: built-ins taken for catalog prompts, and their invented values."""
    expected = {(c.id, i): t.tools for c in original for i, t in enumerate(c.turns, 1)}
    lines = ["## The same prompts with the catalog not loaded", ""]
    lines.append(
        "Mode `embedding` again, on a tool executor with the built-ins only. A turn whose prompt asks for a "
        "catalog tool (and no built-in) should call no tool; a built-in that runs should carry only values the "
        "conversation states (every word and number of its arguments found in the case's messages so far)."
    )
    lines += ["", "| split | catalog-prompt turns that ran a built-in | ... of those, with a value said nowhere |"]
    lines.append("|---|---|---|")
    listed: list[str] = []
    for split in bare.splits:
        records = bare.select(split=split)
        asked = [
            r
            for r in records
            if expected[(r.case_id, r.turn_index)] and not expected[(r.case_id, r.turn_index)] & BUILTINS
        ]
        took = [r for r in asked if r.tools_called & BUILTINS]
        invented = [
            r for r in took if any(invented_tokens(c.arguments_json, _conversation(r, records)) for c in r.calls)
        ]
        lines.append(f"| {split} | {Ratio(len(took), len(asked))} | {Ratio(len(invented), len(took))} |")
        redact = split == "heldout" and not show_heldout
        for r in took:
            calls = (
                ", ".join(c.name for c in r.calls)
                if redact
                else "; ".join(f"{c.name} {c.arguments_json}" for c in r.calls)
            )
            listed.append(f"- {split} **{r.case_id}** turn {r.turn_index}: {calls}")
    if listed:
        lines += ["", "Built-in calls on catalog prompts:", "", *listed]
    return "\n".join(lines) + "\n"


def client_section(served: Report, client: Report) -> str:
    """The catalog brought as client tools against the same catalog served by the mesh (mode ``embedding``)."""
    about = (
        "Mode `embedding` again, on a tool executor with the built-ins only; every turn brings the catalog as "
        "`StartTurn.client_tools` (what the OpenAI edge sends for a request's `tools`) and the eval's client "
        "runs the calls it is handed, answering as the mesh's recorder does. Same planner, same cases."
    )
    return _compared("## The same catalog brought by the client", about, served, client, ("served", "client"))


def mcp_section(served: Report, mcp: Report) -> str:
    """The catalog served by an MCP server over stdio against the same catalog served in-process (``embedding``)."""
    about = (
        "Mode `embedding` again, on a tool executor with the built-ins and the catalog mounted from an MCP "
        "server over stdio (`evals/catalog_mcp_server.py`: each tool's name, description and schema as the file "
        "has them, no name prefix, one attempt, never cached, answering as the in-process recorder does). "
        "Same planner, same cases; only where the catalog is served from differs."
    )
    return _compared("## The same catalog served by an MCP server", about, served, mcp, ("in-process", "MCP"))


def _compared(title: str, about: str, served: Report, other: Report, names: tuple[str, str]) -> str:
    """A section comparing tool choice and arguments per split: ``served`` (the catalog in-process, mode
    ``embedding``) against ``other``'s one mode, the two called ``names`` in the table's head."""
    a_name, b_name = names
    lines = [title, "", about, ""]
    lines.append(
        f"| split | tool choice, {a_name} | tool choice, {b_name} | arguments, {a_name} | arguments, {b_name} |"
    )
    lines.append("|---|---|---|---|---|")
    for split in other.splits:
        a, b = served.summary("embedding", split), other.summary(other.modes[0], split)
        lines.append(f"| {split} | {a.tool_choice} | {b.tool_choice} | {a.arguments} | {b.arguments} |")
    return "\n".join(lines) + "\n"


def _conversation(record: TurnRecord, records: Sequence[TurnRecord]) -> str:
    """The case's user messages and answers up to and including ``record``'s message."""
    earlier = [r for r in records if r.case_id == record.case_id and r.turn_index < record.turn_index]
    return " ".join([*(f"{r.message} {r.answer}" for r in earlier), record.message])
