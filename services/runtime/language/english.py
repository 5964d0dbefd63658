"""English: the rules planning applies to what users write, each with one line saying what it is for.

Every rule here was found on real asks (the eval sets' tuning splits); none
names a tool. Numbers written in words ("twenty-five") come from the one
number grammar in ``services.runtime.numbers``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from services.runtime.language.currencies import currency_codes, takes_currency_code
from services.runtime.numbers import NUMBER_TOKEN, WRITTEN_NUMBER, worded_numbers, words_to_digits

# ------------------------------------------------------------------------------------------ content words

#: Tokens of a message: words, numbers with their separators, arithmetic signs.
_TOKEN = re.compile(r"[a-z]+|\d+(?:[.,]\d+)*|[-+*/^%×÷=]")
#: Function words (and the tails of "what's", "don't"): frequent everywhere, so they say nothing about intent.
_FUNCTION_WORDS = """
a about after all also am an and any are as at be been before but by can could did do does doing for from get got
had has have he her here him his how i if in into is it its just let me might more most much my no not of off on
once only or our out over please she should so some than that the their them then there these they this those to
too under up very was we were what when where which while who whom why will with would you your
s t ll re ve
"""
STOP_WORDS = frozenset(re.findall(r"[a-z]+", _FUNCTION_WORDS))
#: An adverb's ending, off a stem of 4 letters at least ("currently" is "current"; not "early", "daily", "only").
_ADVERB = re.compile(r"(?<=[a-z]{4})ly$")
#: Tokens for the few-shot similarity order: words, numbers and arithmetic signs (numbers and signs as classes).
_FEATURE = re.compile(r"[a-z]+|[0-9]+(?:\.[0-9]+)?|[-+*/^%]")

# ---------------------------------------------------------------------------------------------- clauses

#: Clause ends: ; ? ! anywhere, a comma or colon before a space (not "1,250" or "https://"), joining words.
_SPLIT = re.compile(r"\s*(?:[;?!]|[:,](?=\s)|\s+\b(?:and|also|plus|then|as well as)\b)\s*", re.IGNORECASE)
#: Joining words a clause starts with, dropped from it ("and what time is it").
_LEADING = re.compile(r"^(?:(?:and|also|plus|then)\b\s*)+", re.IGNORECASE)
#: A clause shorter than this many words joins its neighbour, unless it holds a number, a sign or a URL.
_MIN_CLAUSE_WORDS = 3
#: Characters that make a two-word fragment an ask of its own ("calculate 88*12").
_NOT_A_WORD = re.compile(r"[\d/*+=^%:]")
#: How a clause that only qualifies its neighbour starts — a negation or a preposition ("and don't notify
#: anyone", ", as a draft", ", without the attachments"): it joins the ask before it instead of standing alone.
_QUALIFIER = re.compile(r"^(?:don'?t|do not|never|without|not|as|with|but|so that)\b", re.IGNORECASE)

# -------------------------------------------------------------------------------------- what an ask looks like

#: A URL, which the sentence embedder splits into meaningless word pieces.
_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
#: What a URL is embedded as: of three wordings tried, the one that moved no near miss.
URL_WORDS = "this link"
#: A number written in digits, loosely (for shapes and follow-ups): "1,250", "3.5".
_DIGITS = re.compile(r"-?\d[\d,]*(?:\.\d+)?")

#: A question about a concept — its meaning, cause, working, a comparison or good practice — which knowledge
#: answers, not a tool's data ("what does CI/CD stand for?", "why do airlines overbook?"): its topic words can
#: put it near a tool's card, so nearness alone does not make it that tool's ask.
_KNOWLEDGE = re.compile(
    r"(?:^|[.?!]\s+)(?:so\s+|but\s+|ok\s+|okay\s+)?(?:why|how come)\b"
    r"|\bexplain\b|\bmeaning of\b|\bdifference between\b|\bpros and cons\b|\btips (?:for|on)\b"
    r"|\bwhat (?:does|do|did|is)\b[^.?!]{1,40}\b(?:mean|stand for)\b"
    r"|\bhow (?:does|do|did)\b[^.?!]{1,40}\bwork\b"
    r"|\b(?:what'?s|what is) (?:a|the) (?:good|best|right) way\b"
    r"|\bis it (?:rude|polite|ok|okay|normal|bad|wise|weird|acceptable) to\b",
    re.IGNORECASE,
)

# ------------------------------------------------------------------------------------------------ actions

#: Words a request opens with before its verb ("please", "can you", "I'd like to", "go ahead and").
_LEAD_IN = frozenset(
    re.findall(
        r"[a-z']+",
        """please pls kindly can could would will you i i'd id like to want wanna need help me let's lets go ahead
        and just quickly quick also then now ok okay hey hi so actually plus""",
    )
)
#: The kind of thing a request's verb does, for the verbs whose kind is plain whatever follows them: looking
#: things up, making something new, changing it, removing it, sending it. A tool's name says its kind the same
#: way ("search_tickets", "create_ticket"), so "find open tickets" is not a ticket to create. Verbs whose kind
#: depends on their object ("open a ticket" / "open the document", "write a note" / "write back") are left out.
_VERBS_OF_ACTION = {
    "read": "find search look lookup locate list show get fetch check read view see display retrieve",
    "create": "create add make new log record book schedule draft start register",
    "update": "update change edit modify rename move reschedule bump assign reassign mark",
    "delete": "delete remove cancel drop clear erase",
    "send": "send email mail message text post notify ping reply respond forward dm",
}


def _by_word(table: dict[str, str]) -> dict[str, str]:
    """A table of names to the words that write them, read the other way: each word to its name."""
    return {word: name for name, words in table.items() for word in words.split()}


_ACTION_OF_VERB = _by_word(_VERBS_OF_ACTION)
#: Words a question opens with (after the lead-in): a question asks what is so, so it reads, whatever its later
#: words ("what reminders do I have set?" sets none; "are there open tickets about SSO?" files none).
_QUESTION = frozenset(
    re.findall(
        r"[a-z]+",
        "what whats which where wheres when who whom whose how hows why is are was were do does did has have any",
    )
)
#: A request's first word, lower case, an apostrophe kept ("let's").
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")

#: The words a choice's value and a message are compared by (``English.mentions``); one with a digit is a code
#: ("sev1", "p2", "1y"), read only as written, whole.
_ALNUM = re.compile(r"[a-z0-9]+")
#: A letters-only value word shorter than this is never read as written ("fr").
_SHORTEST_VALUE_WORD = 3
#: Two words are one stem written two ways when they share this many first letters and neither has more than
#: ``_STEM_TAIL`` letters past them ("edit"/"editor", "cycle"/"cycling", "negotiate"/"negotiation").
_STEM, _STEM_TAIL = 4, 3


#: A choice written as a count and a period's first letters ("6m", "1y", "30d"): a lookback or a window.
_PERIOD_CODE = re.compile(r"(\d+)([a-z]{1,3})")
#: The periods such a code abbreviates, singular; "6m" is six of a period whose word starts with "m".
_PERIODS = ("minute", "hour", "day", "week", "month", "quarter", "year")
#: Words before a period that count one of it: "the past year", "last month", "a week".
_ONE_PERIOD = frozenset(["a", "an", "one", "past", "last", "this", "per"])


def _writes_period(text: str, count: int, letters: str) -> bool:
    """Whether ``text`` writes ``count`` of a period whose word starts with ``letters`` ("the last 6 months" for
    "6m", "over the past year" for "1y")."""
    tokens = _NUMBER_OR_WORD.findall(words_to_digits(text.lower()))
    for i, token in enumerate(tokens[1:], 1):
        period = token[:-1] if token.endswith("s") and token[:-1] in _PERIODS else token
        if period in _PERIODS and period.startswith(letters):
            before = tokens[i - 1]
            if (before.isdigit() and int(before) == count) or (count == 1 and before in _ONE_PERIOD):
                return True
    return False


def _one_stem(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are the same word or one stem (``_STEM``, ``_STEM_TAIL``)."""
    shared = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return a == b or (shared >= _STEM and len(a) - shared <= _STEM_TAIL and len(b) - shared <= _STEM_TAIL)


# -------------------------------------------------------------------------------------------- quantities

#: How each time unit (a key of ``services.runtime.time_units.SECONDS``) is written, before a number's unit or
#: glued to it ("2 hours", "30min", "an hour").
_TIME_UNIT_SPELLINGS = {
    "millisecond": "ms msec millisecond milliseconds",
    "second": "sec secs second seconds",
    "minute": "min mins minute minutes",
    "hour": "h hr hrs hour hours",
    "day": "day days",
    "week": "wk wks week weeks",
    "fortnight": "fortnight fortnights",
}
_TIME_UNIT_OF = _by_word(_TIME_UNIT_SPELLINGS)
#: Words that say when: a value of these alone (numbers and function words aside) is a time, which only a
#: property about time takes ("today" is no team's name, "20 minutes" no reminder's text). A time unit written in
#: full ("hours", "fortnight") is one of them; its abbreviations ("h", "min") say when only after a count.
_WHEN_WORDS = frozenset(
    re.findall(
        r"[a-z]+",
        """now today tonight tomorrow yesterday morning afternoon evening night noon midnight weekend weekends weekday
        monday tuesday wednesday thursday friday saturday sunday january february april june july august september
        october november december month months year years quarter am pm ago next last past coming every later""",
    )
) | {word for word, unit in _TIME_UNIT_OF.items() if word.startswith(unit)}
#: Words before a unit of time that make it a when ("the next 3 days", "each week", "a few hours", "this month").
_UNIT_QUALIFIERS = frozenset(re.findall(r"[a-z]+", "next last past coming every each this few couple per several"))
#: Words before "time" that make it punctual or an occasion, not a time of day ("on time", "next time", "same time").
_BEFORE_AN_OCCASION = _UNIT_QUALIFIERS | {"on", "same"}
#: A unit's abbreviations ("h", "min"): words of their own elsewhere, never read as a when here.
_UNIT_ABBREVIATIONS = frozenset(w for w, unit in _TIME_UNIT_OF.items() if not w.startswith(unit))
#: A date or a time of day written in digits ("2026-11-01", "2026-11-01T09:00", "15:30", "3pm", "10 am").
_WRITTEN_WHEN = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{1,2}:\d{2}(?::\d{2})?)?\b"  # a date, perhaps with its time
    r"|\b\d{1,2}(?::\d{2})?\s?[ap]\.?m\b\.?"  # 3pm, 10:30 a.m.
    r"|\b\d{1,2}:\d{2}\b"  # 15:30
)
#: Digits joined into something that states no amount: a date or a time ("2026-11-01", "08:30"), a range or an
#: id ("10-12", "INC-2041", "5521-003"), a version ("3.8.1"). A count with its unit glued on ("a 30-minute slot") is
#: an amount.
_NO_AMOUNT = re.compile(r"\d[-:]\d|[a-z][-]\d|\d\.\d+\.\d")
#: Units of the calendar, which a count or a qualifier makes a when as it does a unit of time ("what year is it?").
_CALENDAR_UNITS = frozenset({"month", "months", "year", "years", "quarter", "quarters"})
#: Words that say when besides ``_WHEN_WORDS`` in a message ("at the moment", "currently", "current prices").
_WHEN_ALONE = frozenset(re.findall(r"[a-z]+", "moment current currently presently"))
#: A number or a word, apart: "7am" is 7 and "am", "2h" 2 and "h".
_NUMBER_OR_WORD = re.compile(rf"\d+(?:[.,]\d+)*|{_WORD.pattern}")
#: Whether a token counts what follows it ("2" h, "an" hour).
_COUNTS = re.compile(r"\d.*|an?").fullmatch
#: Words by which a property's name or description says it takes a time (with the words above and the units).
_ABOUT_TIME = frozenset(re.findall(r"[a-z]+", "when date dates time times due until since start end duration period"))
#: Words by which a property's name says its value is an identifier ("order_id", "ticket_id"): one coded word.
_IDENTIFIER = frozenset({"id", "ids", "identifier", "uuid"})
#: A number written on its own — a price's currency sign, a count's "#" and a percent sign aside, a time unit
#: glued on ("30min", "a 30-minute slot") — not a piece of a date, a time, a version or an id ("2026-02-17",
#: "7:30", "3.8.1", "5521-003").
_QUANTITY = re.compile(r"[$€£#~]?(?P<n>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:-?(?P<unit>[a-z]+))?%?")
#: A word's edge punctuation and quotes, off before it is read as a quantity.
_QUANTITY_EDGE = ",.;:!?()[]{}\"'“”‘’"

# --------------------------------------------------------------------------------------------- follow-ups

#: A follow-up that is only a new number ("And 30?", "What about 45?", "How about for 12?").
_ONLY_A_NUMBER = re.compile(
    r"^\s*(?:(?:and|or|now|then|what about|how about)\s+)*(?:for\s+|with\s+)?"
    r"(?P<number>-?\d[\d,]*(?:\.\d+)?)\s*[?.!]*\s*$",
    re.IGNORECASE,
)
#: Words by which a message refers back to the previous turn ("add 6 to that result", "what about there").
_REFERS_BACK = re.compile(
    r"\b(that|it|this|result|answer|previous|same|again|those|these|them|there|then)\b", re.IGNORECASE
)
#: A phrase that stands for the previous turn's result ("add 6 to that result", "double it"), not "what time is it".
_THAT_RESULT = re.compile(
    r"\b(?:that|the|this|previous|last)\s+(?:result|answer|number|total|value|amount|sum|figure|price|cost)\b"
    r"|(?<!\bis )(?<!\bwas )\b(?:that|it)\b"
    r"(?=\s*(?:[.?!,;]|$|\b(?:by|to|from|and|times|plus|minus|divided|squared|cubed)\b))",
    re.IGNORECASE,
)

# ------------------------------------------------------------------------------------------------- spans

#: Where a copied span may not run across: a sentence or clause mark before a space or the end.
_CLAUSE_END = re.compile(r"[.?!;:,](?:\s|$)")
#: Words a copied value never starts or ends with ("in 3 gallons", "1,500 feet to").
_GLUE = re.compile(
    r"(?:about|and|are|as|at|by|for|from|how|in|into|is|many|me|much|of|on|or|than|the|to|what|which|with)",
    re.IGNORECASE,
)
#: Articles: a copied value may start with one ("a gallon") but never ends with one.
_ARTICLE = re.compile(r"an?", re.IGNORECASE)

# ------------------------------------------------------------------------------------------------ numbers

#: Words that stand for numbers beside the number words themselves: a fraction word gives its divisor and value.
_NUMBER_WORDS: dict[str, tuple[float, ...]] = {
    "dozen": (12,),
    "half": (2, 0.5),
    "halve": (2, 0.5),
    "third": (3,),
    "thirds": (3,),
    "quarter": (4, 0.25),
    "quarters": (4, 0.25),
    "fifth": (5, 0.2),
    "tenth": (10, 0.1),
    "double": (2,),
    "twice": (2,),
    "triple": (3,),
    "thrice": (3,),
    "squared": (2,),
    "square": (2,),
    "cubed": (3,),
    "cube": (3,),
    "percent": (100,),
    "per cent": (100,),
    "percentage": (100,),
}
_NUMBER_WORD_PATTERNS = [(re.compile(rf"\b{w}\b"), v) for w, v in _NUMBER_WORDS.items()]


def _content(tokens: Iterable[str]) -> frozenset[str]:
    """``English.content_words`` of a message's tokens."""
    out = set()
    for token in tokens:
        if token[0].isdigit():
            out.add(NUMBER_TOKEN)
        elif token not in STOP_WORDS:
            out.add(_ADVERB.sub("", token[:-1] if len(token) > 3 and token.endswith("s") else token))
    return frozenset(out)


def _is_unit(token: str) -> bool:
    """A unit of time or of the calendar written in full ("days", "month"; not "h")."""
    return (token in _TIME_UNIT_OF and token not in _UNIT_ABBREVIATIONS) or token in _CALENDAR_UNITS


def _qualifies_when(tokens: Sequence[str], i: int) -> bool:
    """Whether ``tokens[i]`` is a word of a phrase that only says when (``English.ask_words``)."""
    token = tokens[i]
    if _is_unit(token):
        before = tokens[max(0, i - 2) : i]
        return any(_COUNTS(t) or t in _UNIT_QUALIFIERS for t in before)
    if _COUNTS(token) and _is_unit(tokens[i + 1] if i + 1 < len(tokens) else ""):
        return i > 0 and tokens[i - 1] in _UNIT_QUALIFIERS  # "the next 3 days"; not "convert 3 days to hours"
    if token in _UNIT_QUALIFIERS and token not in _WHEN_WORDS:
        return any(_is_unit(t) for t in tokens[i + 1 : i + 3])  # "a few days", "each week"
    if token == "time":
        return i > 0 and tokens[i - 1] in _BEFORE_AN_OCCASION
    if token == "right":
        return tokens[i + 1 : i + 2] == ["now"]
    return token in _WHEN_WORDS or token in _WHEN_ALONE


class English:
    """The English rules (``services.runtime.language.Language``)."""

    code = "en"

    def content_words(self, text: str) -> frozenset[str]:
        """Lower case, numbers (in digits or words) as ``<num>``, a plural "s" and an adverb's "ly" off,
        function words out: the words that can carry an ask's intent."""
        return _content(_TOKEN.findall(words_to_digits(text.lower())))

    def ask_words(self, text: str) -> frozenset[str]:
        """The content words outside the phrases that only say when ("right now", "at the moment", "today",
        "over the next 3 days"): any ask may be qualified by one ("is it raining in Porto right now?"), so their
        words say nothing of which tool it asks for. A unit of time counted or qualified is such a phrase; alone
        it is the ask's own word ("what day is it?")."""
        tokens = _TOKEN.findall(words_to_digits(_WRITTEN_WHEN.sub(" ", text.lower())))
        return _content(t for i, t in enumerate(tokens) if not _qualifies_when(tokens, i))

    def features(self, text: str) -> set[str]:
        """Content words with numbers and operators as classes (so 23*47 is like 12*9): few-shot word overlap."""
        out = set()
        for token in _FEATURE.findall(text.lower()):
            if token[0].isdigit():
                out.add("<number>")
            elif token in "-+*/^%":
                out.add("<operator>")
            elif token not in STOP_WORDS:
                out.add(token.rstrip("s") if len(token) > 3 else token)
        return out

    def clauses(self, message: str) -> list[str]:
        """The message's clauses when it has more than one, else []; short fragments join their neighbour."""
        parts = [_LEADING.sub("", p.strip(" ,.")) for p in _SPLIT.split(message)]
        merged: list[str] = []
        for part in parts:
            if not part:
                continue
            if merged and (self._short(part) or self._short(merged[-1])):
                merged[-1] = f"{merged[-1]} and {part}"
            elif merged and _QUALIFIER.match(part):
                merged[-1] = f"{merged[-1]}, {part}"
            else:
                merged.append(part)
        return merged if len(merged) > 1 else []

    @staticmethod
    def _short(clause: str) -> bool:
        """Too short to be an ask of its own: under three words, or two of which none is a number, an
        expression or a URL ("calculate 88*12" and "fetch https://example.com" are asks; "and Paris" is not)."""
        n = len(clause.split())
        return n < _MIN_CLAUSE_WORDS and not (n == 2 and _NOT_A_WORD.search(clause))

    def ask_examples(self) -> list[tuple[str, bool]]:
        """Messages labelled whether they ask for something only a tool does (a lookup, an action, the user's own
        data) or need none (chat, advice, knowledge, writing help, talk about a topic): what the ask classifier
        learns whether from (``services.router.planning.asks``)."""
        return _ask_examples()

    def for_embedding(self, text: str) -> str:
        """``text`` as the sentence embedder should read it: every URL written as ``URL_WORDS``, so the ask
        around a link is what it embeds ("Please read <url> and give me the main points")."""
        return _URL.sub(URL_WORDS, text)

    def shape(self, text: str) -> str:
        """``text`` with every number written as the word "number": what an ask looks like, whatever its values."""
        return _DIGITS.sub("number", text)

    def asks_knowledge(self, text: str) -> bool:
        """Whether ``text`` asks about a concept (a meaning, a cause, how something works, a comparison, good
        practice): nearness to a tool's card is then topic, not an ask for the tool."""
        return _KNOWLEDGE.search(text) is not None

    def action(self, text: str) -> str | None:
        """What the request's opening verb does — "read", "create", "update", "delete" or "send" — or the verb
        itself when its kind is not plain ("merge", "deploy"); "read" for a question; None for a text without a
        verb up front. Read off the first word after the lead-in, so a verb later in the text ("what's on my schedule")
        is not taken for the ask's."""
        for word in _WORD.findall(text.lower()):
            if word not in _LEAD_IN:
                if word in _ACTION_OF_VERB:
                    return _ACTION_OF_VERB[word]
                if word.split("'")[0] in _QUESTION:  # "what's", "how's"
                    return "read"
                return None if word.split("'")[0] in STOP_WORDS else f"={word}"
        return None

    def time_unit(self, word: str) -> str | None:
        """The time unit (a key of ``time_units.SECONDS``) ``word`` spells ("mins": minute), else None."""
        return _TIME_UNIT_OF.get(word.lower())

    def quantities(self, text: str) -> list[tuple[float, str | None]]:
        """The numbers ``text`` writes on their own (in digits or words), each with the time unit written after
        it or glued to it, or None: "the last 2 hours" is (2, hour), "an hour" (1, hour), "under $150"
        (150, None); a date, a time, a version or an id holds none."""
        words = [w.strip(_QUANTITY_EDGE) for w in words_to_digits(text.lower()).split()]
        out: list[tuple[float, str | None]] = []
        for i, word in enumerate(words):
            after = _TIME_UNIT_OF.get(words[i + 1]) if i + 1 < len(words) else None
            if word in {"a", "an"} and after:
                out.append((1.0, after))
                continue
            written = _QUANTITY.fullmatch(word)
            if written is None or (written["unit"] and written["unit"] not in _TIME_UNIT_OF):
                continue  # "5th", "7am": not an amount
            unit = _TIME_UNIT_OF[written["unit"]] if written["unit"] else after
            out.append((float(written["n"].replace(",", "")), unit))
        return out

    def bare_number(self, message: str) -> str | None:
        """The number of a follow-up that is only a new number ("And 30?"), else None."""
        asked = _ONLY_A_NUMBER.match(message)
        return asked["number"] if asked else None

    def with_number(self, previous: str, number: str) -> str | None:
        """``previous`` with its one number replaced by ``number``; None when it has none or several."""
        if len(_DIGITS.findall(previous)) != 1:
            return None
        return _DIGITS.sub(lambda _: number, previous, count=1)

    def refers_back(self, message: str) -> bool:
        """Whether the message points at the previous turn ("that", "there", "again")."""
        return _REFERS_BACK.search(message) is not None

    def with_previous_result(self, text: str, result: str) -> str:
        """``text`` with a phrase that stands for the previous result ("that result", "double it") as ``result``."""
        return _THAT_RESULT.sub(result, text)

    def span_clauses(self, text: str) -> list[str]:
        """The stretches of ``text`` a copied span may not cross."""
        return _CLAUSE_END.split(text)

    def mentions(self, text: str, value: str) -> bool:
        """Whether ``text`` writes ``value``, a choice from a tool's list ("in_progress", "editor", "cycling"):
        each of the value's content words stands in the text as written or as the same stem ("edit" for
        "editor", "cycle" for "cycling", "slide deck" for "slides"); a word with a digit only as written, whole
        ("sev1" is not "sev2"). A value with a letters-only word of under three letters ("fr") or with no content
        word is never read as written: such words say too little. A count and a period's first letters ("6m",
        "1y") is written as such too: as that count of the period ("the last 6 months", "the past year")."""
        period = _PERIOD_CODE.fullmatch(value.lower())
        if period is not None and _writes_period(text, int(period[1]), period[2]):
            return True
        wanted = [w for w in _ALNUM.findall(value.lower().replace("_", " ")) if w not in STOP_WORDS]
        letters = [w for w in wanted if w.isalpha()]
        if not wanted or any(len(w) < _SHORTEST_VALUE_WORD for w in letters):
            return False
        have = set(_ALNUM.findall(text.lower()))
        coded_written = all(w in have for w in wanted if not w.isalpha())
        return coded_written and all(any(_one_stem(w, h) for h in have) for w in letters)

    def says_when(self, text: str) -> bool:
        """Whether ``text`` is a time and nothing else: its words, numbers and function words aside, all say when
        or how long ("today", "this weekend", "in 20 minutes", "7am tomorrow", "the last 2 hours")."""
        tokens = _NUMBER_OR_WORD.findall(text.lower())
        said = [
            w in _WHEN_WORDS or (w in _TIME_UNIT_OF and i > 0 and bool(_COUNTS(tokens[i - 1])))
            for i, w in enumerate(tokens)
            if w[0].isalpha() and w not in STOP_WORDS  # an abbreviation counts after a number only: "H-55012"
        ]
        return bool(said) and all(said)

    def about_time(self, text: str) -> bool:
        """Whether a property's name and description (``text``) say it takes a time ("When to fire", "due date")."""
        return any(w in _ABOUT_TIME or w in _WHEN_WORDS or w in _TIME_UNIT_OF for w in _WORD.findall(text.lower()))

    def names_identifier(self, name: str) -> bool:
        """Whether a property's name (``name``, read as words) says it takes an identifier ("order_id")."""
        return any(w in _IDENTIFIER for w in _WORD.findall(name.lower()))

    def is_glue(self, word: str) -> bool:
        """A word a copied value never starts or ends with ("in", "to", "of")."""
        return _GLUE.fullmatch(word) is not None

    def is_article(self, word: str) -> bool:
        """An article: a copied value may start with one but never ends with one."""
        return _ARTICLE.fullmatch(word) is not None

    def numbers_in(self, text: str) -> set[float]:
        """Numbers ``text`` states or implies: 1,234 and 12.5 and 15% (with 0.15 and 100), words ("twenty-five"),
        and the numbers fraction and multiplier words stand for ("half": 2 and 0.5)."""
        found: set[float] = set()
        lowered = text.lower()
        for match in WRITTEN_NUMBER.finditer(lowered):
            value = float(match.group(0).rstrip("%").replace(",", ""))
            found |= {value, abs(value)}
            if match.group(1) == "%":
                found |= {abs(value) / 100, 100.0}
        found.update(float(value) for _, _, value in worded_numbers(lowered))
        for pattern, values in _NUMBER_WORD_PATTERNS:
            if pattern.search(lowered):
                found.update(values)
        return found

    def amount_text(self, text: str) -> str:
        """``text`` with its dates, times, ranges, ids and versions blanked: the words a number to compute with
        may come from ("add 38.50 to my report, dated 2026-12-04" has one amount, not four)."""
        words = _WRITTEN_WHEN.sub(" ", text.lower()).split()
        return " ".join(w for w in words if not _NO_AMOUNT.search(w))

    def numbers_written(self, text: str) -> list[str]:
        """The numbers written in digits in ``text``, as written less sign and percent ("1,450", "2.50")."""
        return [m.group(0).rstrip("%").lstrip("-") for m in WRITTEN_NUMBER.finditer(text)]

    def number_values(self, text: str) -> list[float]:
        """The absolute values of the numbers written in digits in ``text`` (an expression, an argument)."""
        return [abs(float(m.group(0).rstrip("%").replace(",", ""))) for m in WRITTEN_NUMBER.finditer(text)]

    def currency_codes(self, text: str) -> list[str]:
        """The ISO 4217 codes of the currencies ``text`` names, by name, sign or code ("500 euros in yen": EUR,
        JPY); the table is ``currencies.py``."""
        return currency_codes(text)

    def takes_currency_code(self, text: str) -> bool:
        """Whether a property's name and description say it takes a currency's code ("ISO 4217 code")."""
        return takes_currency_code(text)


@functools.cache
def _ask_examples() -> list[tuple[str, bool]]:
    """``english_asks.jsonl``: 450 asks over about 80 kinds of tool and 450 messages that need none, three in four
    of them in the asks' own topics; written for this purpose by a helper that read none of the eval sets."""
    lines = (Path(__file__).with_name("english_asks.jsonl")).read_text(encoding="utf-8").splitlines()
    return [(row["text"], bool(row["needs_tool"])) for row in map(json.loads, filter(None, lines))]
