"""The schema hint vocabulary: optional ``x-agentmesh-*`` keywords a tool may put in its parameter schema.

Every keyword is optional, and a tool with none at all is a first-class case:
it is planned from its name, description and parameter schema alone (its
free-form string arguments are then copied from the conversation as if
marked ``x-agentmesh-copy`` — any word span or a whole clause:
``copying.implied_copy`` — and every value is grounded in the conversation).
A hint only narrows what the fill may write or tells a judge what the tool's
own arguments prove; the router keeps the keywords out of the grammar it hands
the engine (``copying.copy_options``) and never sends them to a tool.

On a string property:

=================================  ===========================================================================
keyword                            what it changes
=================================  ===========================================================================
``x-agentmesh-copy``               The value is copied from the conversation, never composed. ``true``: any
                                   word span; a regular expression: spans that match it ("a number, then a
                                   unit"); ``"message"``: the asking text itself, whole (a search query). The
                                   fill's grammar becomes an enum of the fitting spans (``copy_constrained``).
``x-agentmesh-copy-words``         The longest span, in words, the property may copy (default 4).
``x-agentmesh-copy-required``      ``true``: a message with no span for this property cannot be this tool's
                                   ask (a conversion needs a quantity, a fetch a URL): the schema judge drops
                                   the tool from the selection.
``x-agentmesh-copy-context``       ``false``: only the message's own spans count, not the earlier turn's that a
                                   follow-up's fill also sees.
``x-agentmesh-copy-evident``       ``true``: a span of this shape is evidence of the ask itself (an arithmetic
                                   expression): an ambiguous message holding one, for this tool alone among
                                   the candidates, is this tool's without a generation. A regular expression:
                                   only spans that also match it whole are (a shape that is also an order
                                   number's, "88-2201", is copied when the tool is chosen, but proves nothing).
``x-agentmesh-copy-prefer``        A regular expression for the spans to offer first when the message has
                                   any ("6 feet" over "6 feet tall").
``x-agentmesh-compose-pattern``    A regular expression a *composed* value must match when no span fits;
                                   ``{number}`` in it stands for the amounts the conversation states (not
                                   the digits of a date, a time or an id) and the tool's constants. A
                                   conversation that states no amount, nor counts a unit, has nothing to
                                   compose from: a required property's tool does not apply (schema judge).
``x-agentmesh-constants``          Numbers the tool's arguments may use that the conversation need not state,
                                   by the word that grounds them: ``{"week": [7, 52], "*": [2]}`` allows 7
                                   when the conversation says "week", and 2 always (grounding, compose).
=================================  ===========================================================================
"""

from __future__ import annotations

COPY_KEYWORD = "x-agentmesh-copy"
COPY_MESSAGE = "message"
COPY_WORDS_KEYWORD = "x-agentmesh-copy-words"
COPY_REQUIRED_KEYWORD = "x-agentmesh-copy-required"
COPY_CONTEXT_KEYWORD = "x-agentmesh-copy-context"
COPY_EVIDENT_KEYWORD = "x-agentmesh-copy-evident"
COPY_PREFER_KEYWORD = "x-agentmesh-copy-prefer"
COMPOSE_PATTERN_KEYWORD = "x-agentmesh-compose-pattern"
CONSTANTS_KEYWORD = "x-agentmesh-constants"
#: In a compose pattern, where a grounded number goes.
GROUNDED_NUMBER = "{number}"
#: The prefix of every hint: a schema without it has no hint to read.
HINT_PREFIX = "x-agentmesh-"

HINTS = (
    COPY_KEYWORD,
    COPY_WORDS_KEYWORD,
    COPY_REQUIRED_KEYWORD,
    COPY_CONTEXT_KEYWORD,
    COPY_EVIDENT_KEYWORD,
    COPY_PREFER_KEYWORD,
    COMPOSE_PATTERN_KEYWORD,
    CONSTANTS_KEYWORD,
)
