"""Planning: which tools a message needs, and their arguments. The file names are the pipeline.

::

    inputs.py       the message, the conversation, follow-up rewriting      (PlanInput → PlanInput)
    cards.py        each tool's texts: examples, or its name/description    (ToolSpec → ToolCard)
    candidates.py   the cards embedded once; a message's texts scored       (message → TextScore per text)
    judges/         the chain: similarity → schema → classifier →          (TextScore → Verdict)
                    whether → likelihood → llm
    fill.py         arguments under each tool's schema, span copying        (Verdict → PlannedCall)
    grounding.py    a call's values must come from the conversation         (PlannedCall → PlannedCall | dropped)
    planner.py      the walk above, for one turn                            (→ Plan)

Beside the walk: ``settings.py`` (thresholds and the chain, validated once),
``spans.py`` and ``copying.py`` (the spans a copied argument may take),
``formats.py`` (the shapes of ``format`` values: an address, a date),
``notation.py`` (the shapes a description or its examples give: "HH:MM",
"owner/name", "e.g. 'LH 401'", one code word for an ``order_id``; a span of
another property's is no option),
``choices.py`` (a value of a property's own list that the user wrote, a
switch whose name is written, and the code of a currency named),
``labels.py`` (a value written beside a property's name, or beside the words
that open its description, is that property's),
``quantities.py`` (the amounts a numeric property takes, in the unit its name
names), ``lexical.py`` (the rare words a message shares with a described
tool's card, and its opening verb against the tool's name, added to its
cosine), ``hints.py`` (the
optional ``x-agentmesh-*`` schema keywords, documented in one place),
``prompts.py`` and ``shots.py`` (the prompts and worked examples of the LLM
judge and the fill), ``structured.py`` (one constrained generation),
``scoring.py`` (one scored continuation: the likelihood judge's),
``asks.py`` (whether a message asks for what a tool does: the whether judge's),
``embedding.py``, ``intent_words.py``, ``card_classifier.py`` and
``no_tool_examples.py``. The language of the messages is
``services.runtime.language``; no file here names a tool or holds a word list.

One message, walked: "What's 12% of 250 and what time is it in Lima?" with
the built-in tools loaded. ``inputs`` finds nothing to rewrite (not a
follow-up). ``candidates`` embeds the message and its two clauses (the
language splits at "and") and scores each against every card. The
``similarity`` judge finds the first clause near the arithmetic tool's
examples and sharing its intent word ``<num>``, the second near the time
tool's with "time": TOOLS, each with its clause. ``schema`` checks each tool
can be filled from its clause (its required copied arguments have spans) and
keeps both; ``classifier``, ``whether`` (both tools bring examples: it reads
only tools described alone), ``likelihood`` (which would reorder the
candidates of a message left undecided) and ``llm`` have nothing left to do. ``fill``
copies "12% of 250" (one span of the expression's shape: no generation) and
"Lima" (one place: none either); ``grounding`` finds every value in the
message. Two calls, zero generations before the answer.
"""

from __future__ import annotations

from services.router.planning.inputs import Plan, PlanInput, PlannedCall
from services.router.planning.planner import Planner, build_chain
from services.router.planning.settings import JUDGE_NAMES, MODE_CHAINS, PlanningSettings, SelectorSettings

__all__ = [
    "JUDGE_NAMES",
    "MODE_CHAINS",
    "Plan",
    "PlanInput",
    "PlannedCall",
    "Planner",
    "PlanningSettings",
    "SelectorSettings",
    "build_chain",
]
