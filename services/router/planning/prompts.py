"""Planning prompts: the model chooses tools (LLM selection) and fills in their arguments, as constrained JSON.

Two small decisions, because a small model makes small decisions far more
reliably than one big one:

1. **choose** — ``{"tools": [...]}``, each item an enum of the candidate tool
   names (empty list: answer directly). Used by ``--tool-selection llm`` for
   every message and by the embedding selector for its ambiguous band only.
   ``required`` sets ``minItems: 1``.
2. **fill** — for one chosen tool, its arguments, constrained by the tool's own
   JSON schema from ``ListTools``. The fills of one round run concurrently (the
   replica batches them).

Every worked example comes from the tools themselves (``ToolSpec.examples``
with arguments for fill; examples and near misses for choose), so a new tool
needs no change here. The examples are ordered by similarity to the message,
most similar last: small models lean heavily on the nearest example (measured
on the embedded SmolLM2-135M: with a fixed order it copied the last example's
answer for almost every message), so the lean is pointed where it helps —
dynamic few-shot selection. Larger models use the whole list either way.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentmesh.common.v1 import common_pb2
from services.router.grounding import number_pattern
from services.router.intent_words import STOP_WORDS
from services.router.no_tool_examples import NO_TOOL_EXAMPLES
from services.router.prompt import Message

log = logging.getLogger(__name__)

MAX_CALLS_PER_ROUND = 3
#: Worked examples per prompt: enough to show the shape, few enough to keep the prompt short (5, not 3: the
#: composed calculator fills of the tuning turns were 2-3 more of 35-36 right in each of three offline
#: comparisons, EVAL.md run E).
FILL_EXAMPLES = 5
CHOOSE_EXAMPLES_PER_TOOL = 2
CHOOSE_NEGATIVES = 4


_WORD = re.compile(r"[a-z]+|[0-9]+(?:\.[0-9]+)?|[-+*/^%]")


def _features(text: str) -> set[str]:
    """Content words of a message, with numbers and operators as classes (so 23*47 is like 12*9)."""
    out = set()
    for token in _WORD.findall(text.lower()):
        if token[0].isdigit():
            out.add("<number>")
        elif token in "-+*/^%":
            out.add("<operator>")
        elif token not in STOP_WORDS:
            out.add(token.rstrip("s") if len(token) > 3 else token)
    return out


def by_similarity(message: str, examples: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Examples ordered least to most similar to ``message`` (Jaccard on content words); ties keep order."""
    target = _features(message)

    def score(example: tuple[str, Any]) -> float:
        words = _features(example[0])
        union = target | words
        return len(target & words) / len(union) if union else 0.0

    return sorted(examples, key=score)


@dataclass(frozen=True)
class PlannedCall:
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, sort_keys=True, separators=(",", ":"))


def choose_schema(candidates: Sequence[str], mode: str) -> dict[str, Any]:
    """JSON schema of the choose step over ``candidates`` under a tool-choice mode (auto or required)."""
    calls: dict[str, Any] = {"type": "array", "items": {"enum": list(candidates)}, "maxItems": MAX_CALLS_PER_ROUND}
    if mode == "required":
        calls["minItems"] = 1
    return {"type": "object", "properties": {"tools": calls}, "required": ["tools"], "additionalProperties": False}


def choose_messages(
    tools: Sequence[common_pb2.ToolSpec],
    user_message: str,
    previous_results: str | None = None,
    no_tool: Sequence[str] = NO_TOOL_EXAMPLES,
) -> list[Message]:
    """The choose prompt among ``tools``: their descriptions, then worked examples nearest the message.

    The "no tool" examples are ``no_tool`` (requests no tool serves) and, when one tool is the only
    candidate, that tool's near misses. With several candidates a near miss of one may be another's ask:
    "How many hours are in a week?" is the clock's near miss and the calculator's business, and shown
    as needing no tool it taught the model to answer a calculator ask by itself.
    """
    system = (
        "Decide which tools are needed to answer the user's message. Tools:\n"
        + "\n".join(f"- {t.name}: {t.description}" for t in tools)
        + '\nReply with JSON: {"tools": [...]}. Use an empty list when no tool is needed '
        "(writing, greetings, opinions, general knowledge)."
    )
    examples: list[tuple[str, list[str]]] = []
    for tool in tools:
        mine = [(e.text, [tool.name]) for e in tool.examples]
        examples += by_similarity(user_message, mine)[-CHOOSE_EXAMPLES_PER_TOOL:]
    misses = [n for t in tools for n in t.negative_examples] if len(tools) == 1 else []
    negatives = [(n, list[str]()) for n in [*no_tool, *misses]]
    examples += by_similarity(user_message, negatives)[-CHOOSE_NEGATIVES:]
    messages: list[Message] = [Message("system", system)]
    for question, needed in by_similarity(user_message, examples):
        messages.append(Message("user", question))
        messages.append(Message("assistant", _compact({"tools": needed})))
    messages.append(Message("user", user_message))
    if previous_results is not None:
        messages.append(Message("user", previous_results + "\nIf these results answer my message, choose no tool."))
    return messages


#: The tool name of "no call" in the band's one-generation decision (``call_schema``).
NO_CALL = "none"
CALL_SHOTS = 3


def call_schema(tools: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """JSON schema of the band's decision: one call of one of ``tools`` ((name, parameters schema JSON),
    already copy-constrained) with its arguments, or ``{"tool": "none"}``."""
    options: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"tool": {"const": NO_CALL}},
            "required": ["tool"],
            "additionalProperties": False,
        }
    ]
    for name, parameters in tools:
        options.append(
            {
                "type": "object",
                "properties": {"tool": {"const": name}, "arguments": json.loads(parameters)},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": options}


def call_messages(
    tools: Sequence[common_pb2.ToolSpec], user_message: str, shots: Sequence[tuple[str, dict[str, Any]]]
) -> list[Message]:
    """The band's prompt: decide whether one of ``tools`` is needed and write its call, in one generation.

    ``shots`` are worked decisions, least to most similar: the candidates' examples as calls and requests
    no tool serves as ``{"tool": "none"}``.
    """
    lines = []
    for tool in tools:
        props = json.loads(tool.parameters_json_schema).get("properties", {})
        lines.append(f"- {tool.name}: {tool.description} Arguments: {', '.join(props)}.")
    system = (
        "Decide whether the user's message needs one of these tools, and if it does, write the call. Tools:\n"
        + "\n".join(lines)
        + '\nReply with JSON: {"tool": name, "arguments": {...}}, or {"tool": "none"} when no tool is needed '
        "(writing, greetings, opinions, general knowledge)."
    )
    messages: list[Message] = [Message("system", system)]
    for question, decision in shots:
        messages.append(Message("user", question))
        messages.append(Message("assistant", _compact(decision)))
    messages.append(Message("user", user_message))
    return messages


def parse_call(text: str, candidates: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """(tool, arguments) from the band's decision; None for "no call" and for unparseable output."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable tool decision: %r", text[:200])
        return None
    if not isinstance(data, dict) or data.get("tool") not in candidates:
        return None
    arguments = data.get("arguments")
    return (data["tool"], arguments) if isinstance(arguments, dict) else None


def _compact(value: Any) -> str:
    """JSON as the grammar lets the model write it (no whitespace): examples in another layout pull the model
    off its own distribution at every separator (measured on the dev split: 18 → 19 of 24 exact fills)."""
    return json.dumps(value, separators=(",", ":"))


def worked_examples(tool: common_pb2.ToolSpec) -> list[tuple[str, dict[str, Any]]]:
    """The tool's examples that carry arguments, as (message, arguments)."""
    return [(e.text, json.loads(e.arguments_json)) for e in tool.examples if e.arguments_json]


def fill_messages(
    tool: common_pb2.ToolSpec,
    user_message: str,
    context: str = "",
    shots: Sequence[tuple[str, dict[str, Any]]] | None = None,
) -> list[Message]:
    """The fill prompt of ``tool`` for ``user_message``.

    ``context`` (e.g. the previous answer) is given when the message refers
    back. ``shots`` are the worked examples, least to most similar; by default
    the tool's examples ordered by word overlap.
    """
    schema = json.loads(tool.parameters_json_schema)
    params = "; ".join(
        f"{k} ({v.get('type', 'any')}{': ' + v['description'] if v.get('description') else ''})"
        for k, v in schema.get("properties", {}).items()
    )
    system = (
        f"Write the arguments of the {tool.name} tool ({tool.description}) for the user's message, as JSON. "
        f"Arguments: {params}."
    )
    if context:
        system += " When the message refers to an earlier result, use the number from the earlier conversation."
    if shots is None:
        shots = by_similarity(user_message, worked_examples(tool))[-FILL_EXAMPLES:]
    messages: list[Message] = [Message("system", system)]
    for question, args in shots:
        messages.append(Message("user", question))
        messages.append(Message("assistant", _compact(args)))
    message = f"Earlier: {context}\nNow: {user_message}" if context else user_message
    messages.append(Message("user", message))
    return messages


#: A string property a tool marks with this keyword is copied from the conversation, never composed:
#: the fill's grammar lets the model pick only among the message's own word spans (``copy_constrained``).
#: Its value is ``true``, a regular expression the span must match ("a number, then a unit"), or
#: ``COPY_MESSAGE``: the value is the asking text itself, whole (a search query).
COPY_KEYWORD = "x-agentmesh-copy"
COPY_MESSAGE = "message"
#: Beside a copy keyword: the longest span, in words, the property may copy (default ``MAX_SPAN_WORDS``).
COPY_WORDS_KEYWORD = "x-agentmesh-copy-words"
#: Beside a copy keyword: ``true`` when the tool cannot apply to a message that holds no span for this
#: property (a conversion needs a quantity, a fetch a URL) — the selector's choice is then overruled (``applies``).
COPY_REQUIRED_KEYWORD = "x-agentmesh-copy-required"
#: Beside a copy keyword: ``false`` when only the message's own spans count, not the earlier turn's that a
#: follow-up's fill also sees ("there" is a place said before; an earlier expression is the earlier ask).
COPY_CONTEXT_KEYWORD = "x-agentmesh-copy-context"
#: Beside a copy keyword: ``true`` when a span of this shape in the message is evidence of the ask itself (an
#: arithmetic expression, "minutes in a week"): a message the selector left ambiguous that holds one, for
#: this tool alone among the candidates, is this tool's without a generation deciding (``evident``).
COPY_EVIDENT_KEYWORD = "x-agentmesh-copy-evident"
#: Beside a copy keyword: a regular expression a *composed* value must match when no span fits (the
#: grammar's ``pattern``, for the fill only: the tool's own schema still takes what its users write).
COMPOSE_PATTERN_KEYWORD = "x-agentmesh-compose-pattern"
#: In a compose pattern, where a number goes: the router puts there the numbers the conversation grounds
#: (``grounding.number_pattern``), so a composed value cannot carry an invented number.
GROUNDED_NUMBER = "{number}"
#: Beside a copy keyword: a regular expression for the spans to offer when the message has any ("6 feet", a
#: quantity in a known unit, over "6 feet tall"); the other fitting spans are offered only when none is.
COPY_PREFER_KEYWORD = "x-agentmesh-copy-prefer"
MAX_SPAN_WORDS = 4
MAX_SPANS = 256
_CLAUSE_END = re.compile(r"[.?!;:,](?:\s|$)")
_EDGE = "\"'`“”‘’()[]{}<>="
_KEPT_EDGE = _EDGE.replace("()", "")  # the edge a word keeps its parentheses inside
#: Words a copied value never starts or ends with ("in 3 gallons", "1,500 feet to"); articles may start one.
_GLUE = re.compile(
    r"(?:about|and|are|as|at|by|for|from|how|in|into|is|many|me|much|of|on|or|than|the|to|what|which|with)",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"an?", re.IGNORECASE)


def spans(*texts: str, max_words: int = MAX_SPAN_WORDS) -> list[str]:
    """Every run of 1..``max_words`` words within one clause of ``texts``, edge punctuation off, in order,
    that neither starts nor ends with a glue word."""
    found: dict[str, None] = {}
    for text in texts:
        for clause in _CLAUSE_END.split(text):
            # Each word bare, and with its parentheses: "(12 + 8) * 5" is a span only with them.
            pairs = [(w.strip(_EDGE).rstrip(".,;:!?"), w.strip(_KEPT_EDGE).rstrip(".,;:!?")) for w in clause.split()]
            pairs = [p for p in pairs if p[0]]
            words = [bare for bare, _ in pairs]
            for i in range(len(words)):
                if _GLUE.fullmatch(words[i]):
                    continue
                for j in range(i + 1, min(len(words), i + max_words) + 1):
                    if not (_GLUE.fullmatch(words[j - 1]) or _ARTICLE.fullmatch(words[j - 1])):
                        # A span never cuts a parenthesis in half ("3+4)*(5-2" is no expression).
                        bare = " ".join(words[i:j])
                        if _whole_parentheses(bare):
                            found.setdefault(bare, None)
                        if any(kept != word for word, kept in pairs[i:j]):  # a word had parentheses
                            bracketed = " ".join(kept for _, kept in pairs[i:j])
                            if _whole_parentheses(bracketed):
                                found.setdefault(bracketed, None)
    return list(found)


def _whole_parentheses(span: str) -> bool:
    """Whether every parenthesis in ``span`` is closed after it opens, and the span is not one wrapped whole
    ("(11 lb)" is offered bare)."""
    depth = 0
    for char in span:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    wrapped = span.startswith("(") and span.endswith(")") and _whole_parentheses(span[1:-1])
    return depth == 0 and not wrapped


def _fits(prop: dict[str, Any], shape: object, value: str) -> bool:
    if not prop.get("minLength", 0) <= len(value) <= prop.get("maxLength", len(value)):
        return False
    patterns = [p for p in (prop.get("pattern"), shape) if isinstance(p, str)]
    return all(re.search(p, value) is not None for p in patterns)


def copy_constrained(schema_json: str, *sources: str) -> str:
    """The tool's schema with each copy property (``COPY_KEYWORD``) narrowed to the sources' spans that fit it.

    Why: a small model copies well and composes badly — asked for a quantity it
    wrote "3.00 grams" for "3 pounds", and a URL grew a path the user never
    typed. An enum of the message's spans makes the copy exact by construction;
    a property with no fitting span keeps its free-form schema (the tool then
    says what is wrong).
    """
    if COPY_KEYWORD not in schema_json:
        return schema_json
    schema, found, _ = _copy_options(schema_json, sources)
    for name, options in _one_mention_one_argument(found).items():
        if options:
            schema["properties"][name] = {"type": "string", "enum": options}
    return json.dumps(schema)


def applies(schema_json: str, *sources: str) -> bool:
    """Whether the sources (the message first, then the earlier turn) hold a span for every property the tool
    marks ``COPY_REQUIRED_KEYWORD``.

    Why: a topic match is not an ask. "Why is a foot called a foot?" is near the
    unit converter's examples in meaning, but holds no quantity to convert; the
    tool's own schema says so, in the tool's file, with no router change.
    """
    if COPY_REQUIRED_KEYWORD not in schema_json:
        return True
    _, found, marked = _copy_options(schema_json, sources)
    own = _own_mentions(found)
    return all(own.get(name) for name in marked[COPY_REQUIRED_KEYWORD])


def unmentioned(schema_json: str, *sources: str) -> frozenset[str]:
    """The copy properties for which the sources hold no span of their own (a span inside another copy
    property's, such as the "km/h" of "130 km/h", is that property's mention, not this one's).

    Why: a tool chosen from one clause of a message may find only part of its
    ask there ("…the signs say 130 km/h, | what's that in mph?"); filled from
    that clause, the converter was asked for km/h in km/h.
    """
    if COPY_KEYWORD not in schema_json:
        return frozenset()
    own = _own_mentions(_copy_options(schema_json, sources)[1])
    return frozenset(name for name, options in own.items() if not options)


def evident(schema_json: str, message: str) -> bool:
    """Whether ``message`` holds a span for a property the tool marks ``COPY_EVIDENT_KEYWORD``.

    Why: the selector's embedding and intent words can leave an ask in the band
    that the tool's own shape recognises ("minutes in a week?", "what's twelve
    times eleven": no digit, so no intent word); the 135M model then often
    answered it by itself, wrongly.
    """
    if COPY_EVIDENT_KEYWORD not in schema_json:
        return False
    _, found, marked = _copy_options(schema_json, (message,))
    return any(found.get(name) for name in marked[COPY_EVIDENT_KEYWORD])


def pinned(schema_json: str, message: str) -> bool:
    """Whether ``message`` mentions exactly one value of its own for every property the tool copies from a span
    (a message-copied query does not count), and the tool has one at least.

    Why: an ask the selector leaves in the band for want of an intent word ("Is it past midnight in Hong
    Kong?", "I want to ring my sister in Mexico City. Would she still be at work?") is near the tool's examples
    and names the one place its argument needs; a near miss in the tool's topic names none ("Why is a foot
    called a foot?" has no target unit) or several ("the difference between GMT and UTC").
    """
    _, found, marked = _copy_options(schema_json, (message,))
    spanned = marked[COPY_KEYWORD]
    if not spanned:
        return False
    own = _own_mentions(found)
    return all(len(own.get(name, [])) == 1 for name in spanned)


def _copy_options(
    schema_json: str, sources: Sequence[str]
) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, list[str]]]:
    """The schema with the copy keywords taken out (a copy property with no option held to its compose
    pattern), each copy property's options among the sources' spans, and per flag keyword
    (``COPY_REQUIRED_KEYWORD``, ``COPY_EVIDENT_KEYWORD``) the names of the properties it marks; under
    ``COPY_KEYWORD``, the properties copied from a span (every copy shape but ``COPY_MESSAGE``)."""
    schema = json.loads(schema_json)
    found: dict[str, list[str]] = {}
    marked: dict[str, list[str]] = {COPY_REQUIRED_KEYWORD: [], COPY_EVIDENT_KEYWORD: [], COPY_KEYWORD: []}
    for name, prop in schema.get("properties", {}).items():
        if not isinstance(prop, dict):
            continue
        shape = prop.pop(COPY_KEYWORD, None)
        max_words = prop.pop(COPY_WORDS_KEYWORD, MAX_SPAN_WORDS)
        searched = sources if prop.pop(COPY_CONTEXT_KEYWORD, True) else sources[:1]
        compose = prop.pop(COMPOSE_PATTERN_KEYWORD, None)
        prefer = prop.pop(COPY_PREFER_KEYWORD, None)
        for flag in (COPY_REQUIRED_KEYWORD, COPY_EVIDENT_KEYWORD):
            if prop.pop(flag, False):
                marked[flag].append(name)
        if shape not in (None, COPY_MESSAGE):
            marked[COPY_KEYWORD].append(name)
        if shape and prop.get("type") == "string":
            if shape == COPY_MESSAGE:
                whole = " ".join(sources[0].split()).strip(_EDGE + ".,;:!? ") if sources else ""
                found[name] = [whole] if whole and _fits(prop, True, whole) else []
            else:
                fitting = [s for s in spans(*searched, max_words=max_words) if _fits(prop, shape, s)]
                preferred = [s for s in fitting if isinstance(prefer, str) and re.search(prefer, s)]
                fitting = preferred or fitting
                # Maximal first: a part of a longer mention stays hidden even when the whole is not verbatim
                # ("12 + 8" is part of "(12 + 8) * 3", and neither is the expression to copy).
                found[name] = [s for s in _maximal(fitting) if _verbatim(s, searched)][:MAX_SPANS]
            if not found[name] and isinstance(compose, str):
                # xgrammar takes no pattern beside length bounds: the fill's token limit and the tool bound it.
                prop.pop("minLength", None)
                prop.pop("maxLength", None)
                prop["pattern"] = compose.replace(GROUNDED_NUMBER, number_pattern(*sources))
    return schema, found, marked


def _verbatim(span: str, sources: Sequence[str]) -> bool:
    """Whether ``span`` is written as it stands in a source: words whose edge punctuation was trimmed are not
    joined into something the user did not write ("(12 + 8) * 3" holds no "12 + 8 * 3")."""
    return any(span in " ".join(source.split()) for source in sources)


def _one_mention_one_argument(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per copy property, its options less those inside a longer option of another copy property.

    "How many feet is 3 meters?": the quantity is "3 meters", so "meters" is
    not the target unit — one mention fills one argument (the 135M model chose
    it 1 time in 3 on our probes). A property is never left with no option by this.
    """
    out = {}
    for name, options in found.items():
        others = _others(found, name)
        kept = [o for o in options if not any(_inside(o, x) for x in others)]
        out[name] = kept or options
    return out


def _own_mentions(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per copy property, its options that are a mention of its own: not inside *every* option of the other
    copy properties ("kilos" beside "2 kilos" and "5 pounds" is a target for 5 pounds; "miles" beside "26.2
    miles" alone is not). May leave a property with none (``applies``, ``unmentioned``)."""
    out = {}
    for name, options in found.items():
        others = _others(found, name)
        out[name] = [o for o in options if not others or not all(_inside(o, x) for x in others)]
    return out


def _others(found: dict[str, list[str]], name: str) -> list[str]:
    """The options of every copy property but ``name``."""
    return [o for other, opts in found.items() if other != name for o in opts]


def _maximal(options: list[str]) -> list[str]:
    """The options that are not part of a longer one that is a single mention: "Mexico City" and not "Mexico",
    "fluid ounces" and not "ounces" — a shorter span inside it is the same mention, cut short. A longer span
    with a glue word inside ("meters to feet") is two mentions and hides neither."""
    single = [o for o in options if not any(_GLUE.fullmatch(w) for w in o.split()[1:-1])]
    return [o for o in options if not any(_inside(o, other) for other in single)]


def _inside(part: str, whole: str) -> bool:
    """Whether ``part`` is a shorter run of ``whole``'s words ("Mexico" in "Mexico City", not "Mexico" itself)."""
    return len(part) < len(whole) and f" {part} " in f" {whole} "


def determined(schema_json: str) -> dict[str, Any] | None:
    """The arguments when the (copy-constrained) schema leaves one choice for every required property, else None.

    Then a generation could only write what the grammar forces, so the fill
    skips it: a kb query copied whole, a clock place named once. Optional
    properties are left to the tool's defaults.
    """
    schema = json.loads(schema_json)
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not required:
        return None
    out: dict[str, Any] = {}
    for name in required:
        options = props.get(name, {}).get("enum") if isinstance(props.get(name), dict) else None
        if not isinstance(options, list) or len(options) != 1:
            return None
        out[name] = options[0]
    return out


def parse_choice(text: str, candidates: Sequence[str]) -> list[str]:
    """Tool names from the choose step; unparseable output (e.g. cut off) chooses nothing."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable tool choice: %r", text[:200])
        return []
    names = set(candidates)
    chosen = data.get("tools", []) if isinstance(data, dict) else []
    unique = list(dict.fromkeys(n for n in chosen if isinstance(n, str) and n in names))
    return unique[:MAX_CALLS_PER_ROUND]


def parse_arguments(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable tool arguments: %r", text[:200])
        return None
    return data if isinstance(data, dict) else None
