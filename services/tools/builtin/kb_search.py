"""kb_search: BM25 search over a local knowledge base of Markdown documents.

The shipped corpus (``services/tools/kb/``) is AgentMesh's own documentation:
an overview and an operations guide (one section per service and concern:
the gateway, auth, rate limits, sessions, failover, caches, metrics, health,
running it, Kubernetes), split into sections at headings; the index is built
once when the tool is created. BM25 (k1 = 1.5, b = 0.75) needs no model and
works offline.

The router copies the user's question whole as the query (its schema marks
``query`` so), so a question's filler words must not decide the ranking: terms
are lightly stemmed ("listens" is "listen"), function words and question
filler ("how does … work", "what do I get back") are dropped, a query word the
index does not hold reaches the docs' words it begins or that begin it
("authenticate" finds "auth"; "responsibilities" does not find "response"),
and a query term found in more than half of the sections ("AgentMesh" in its
own docs, where every section is indexed with its file's name; "tool" in a
tool system's) does not rank them, unless the query has no other term: then
the sections titled with its terms answer first. Titles count three times.

Measured on kb questions written by helpers who read only the docs
(``/tmp`` scripts, the tool's summary checked for the expected words; EVAL.md):
the overview's 121 tuning questions 119 → 121 with the operations guide added,
and 41 of 45 questions written afterwards about both files.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.tools.registry import ToolDefinition, ToolExample

KB_DIR = Path(__file__).resolve().parent.parent / "kb"
WORD = re.compile(r"[a-z0-9]+")
#: Words too common to rank a section by (BM25 would still count them).
_STOP_WORDS = (
    # function words (pronouns, auxiliaries, conjunctions, articles, prepositions of no topic)
    "a about am an and any are as at be been being but by can could did do does doing each for from had has have"
    " having he her here hers him his how i if in into is it its itself just me my myself of on or our ours she"
    " should so some such than that the their them then there these they this those through to too very was we"
    " were what when where which while who whom why will with would you your yours"
    # a question's own filler: the router sends the question whole
    " back basis box care come comes explain get gets happen happens out take takes tell thing things up us use"
    " used uses whole work works"
    # what an apostrophe leaves: "the router's", "don't"
    " s t"
)
STOP = frozenset(re.findall(r"[a-z]+", _STOP_WORDS))
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(])")
MAX_SUMMARY_SENTENCE = 300
#: The shortest indexed term a query term may reach by prefix (``Bm25Index._spellings``).
MIN_PREFIX = 4


def words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOP]


_SUFFIX = re.compile(r"(?<=[a-z]{4})(?:ing|ed|es|s)$")
_IES = re.compile(r"(?<=[a-z]{2})ie[sd]$")
_FINAL_E = re.compile(r"(?<=[a-z]{4})e$")


def stem(word: str) -> str:
    """``word`` with plural and tense endings off, one spelling for every form: "retries", "retried" and
    "retry" are "retry"; "caches", "cached", "caching" and "cache" are "cach"; "listens" is "listen"."""
    if _IES.search(word):
        return _IES.sub("y", word)
    return _FINAL_E.sub("", _SUFFIX.sub("", word))


def terms(text: str) -> list[str]:
    """``words`` stemmed (``stem``), so a question's "listens" finds the docs' "listen"."""
    return [stem(w) for w in words(text)]


@dataclass(frozen=True)
class Section:
    source: str
    title: str
    text: str


def load_sections(folder: Path) -> list[Section]:
    sections: list[Section] = []
    for path in sorted(folder.glob("*.md")):
        title, lines = path.stem, list[str]()
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("#"):
                if "".join(lines).strip():
                    sections.append(Section(path.name, title, "\n".join(lines).strip()))
                title, lines = line.lstrip("#").strip(), list[str]()
            else:
                lines.append(line)
        if "".join(lines).strip():
            sections.append(Section(path.name, title, "\n".join(lines).strip()))
    return sections


@dataclass(frozen=True)
class _Field:
    """One indexed text of every section (its whole text, or its title): term counts, lengths, mean length."""

    docs: list[Counter[str]]
    lengths: list[int]
    avg: float

    @classmethod
    def of(cls, texts: list[str]) -> _Field:
        docs = [Counter(terms(t)) for t in texts]
        lengths = [sum(d.values()) for d in docs]
        return cls(docs, lengths, sum(lengths) / len(lengths) if lengths else 0.0)


class Bm25Index:
    def __init__(self, sections: list[Section], k1: float = 1.5, b: float = 0.75) -> None:
        self.sections = sections
        self.k1, self.b = k1, b
        # A section is indexed with its title three times (a title names what the section answers) and its file's
        # name (what every section of the file is about: "agentmesh" — so common that it ranks nothing).
        self.body = _Field.of([f"{s.title} " * 3 + f"{Path(s.source).stem} {s.text}" for s in sections])
        self.titles = _Field.of([s.title for s in sections])
        #: The docs' words (``MIN_PREFIX`` letters at least) and their terms, for ``_spellings``.
        self.vocabulary = {w: stem(w) for s in sections for w in words(f"{s.title} {s.text}") if len(w) >= MIN_PREFIX}
        self._sorted_words = sorted(self.vocabulary)  # the words a query word begins: one bisected range
        df: Counter[str] = Counter()
        for d in self.body.docs:
            df.update(d.keys())
        n = len(self.body.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.common = frozenset(w for w, f in df.items() if f > n / 2)

    def search(self, query: str, top_k: int) -> list[tuple[float, Section]]:
        """The best ``top_k`` sections for the query's telling terms; if those find none, the sections titled
        with its terms, else the sections holding them.

        A question made only of common terms ("What tools does AgentMesh come with?": "tool" is in most
        sections of a tool system's docs) names its section by its title; counted in the body, the longest
        section about tools (the executor's) outranks the one titled "Tools".
        """
        found = [e for w in words(query) for e in self._spellings(w)]
        telling = [t for t in found if t not in self.common]
        return (
            (telling and self._rank(telling, top_k, self.body))
            or self._rank(found, top_k, self.titles)
            or self._rank(found, top_k, self.body)
        )

    def _spellings(self, word: str) -> list[str]:
        """A query word's terms as the index spells them: its stem when indexed, else the terms of the docs' words
        it begins or that begin it, ``MIN_PREFIX`` letters at least ("authenticate" finds the docs' "auth"); its
        stem when nothing is that near (it then ranks nothing).

        Words, not stems, are compared: the stem of "response" begins "responsibilities", the word does not.
        """
        term = stem(word)
        if term in self.idf or len(word) < MIN_PREFIX:
            return [term]
        # The docs' words it begins sit together in sorted order; the ones that begin it are its own prefixes.
        after = itertools.islice(self._sorted_words, bisect.bisect_left(self._sorted_words, word), None)
        begun = list(itertools.takewhile(lambda w: w.startswith(word), after))
        begins = [word[:n] for n in range(MIN_PREFIX, len(word)) if word[:n] in self.vocabulary]
        near = sorted({self.vocabulary[w] for w in [*begun, *begins]})
        return near or [term]

    def _rank(self, wanted: list[str], top_k: int, field: _Field) -> list[tuple[float, Section]]:
        """BM25 of the sections for ``wanted`` over one ``field`` of them (the idf is always the body's)."""
        scored = []
        for doc, length, section in zip(field.docs, field.lengths, self.sections, strict=True):
            score = 0.0
            for t in wanted:
                tf = doc.get(t, 0)
                if tf:
                    norm = tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * length / field.avg))
                    score += self.idf[t] * norm
            if score > 0:
                scored.append((score, section))
        scored.sort(key=lambda x: -x[0])
        return scored[:top_k]


def best_sentence(text: str, query: str) -> str:
    """The two sentences of ``text`` sharing most words with ``query`` (earlier ones on a tie), in the
    section's order, on one line, each capped.

    The best section's first sentence is often about something else (a section
    covers several services); the sentences the query's words are in are the ones
    that answer it. Two, because one sentence often sets the terms and the next
    answers ("P2 for batch work." then "Under overload the gateway sheds P2
    first with RESOURCE_EXHAUSTED"), and both share the query's words.
    """
    sentences = _SENTENCE_END.split(" ".join(text.split()))
    wanted = set(terms(query))
    ranked = sorted(range(len(sentences)), key=lambda i: (-len(wanted.intersection(terms(sentences[i]))), i))
    chosen = [sentences[i] for i in sorted(ranked[:2])]
    return " ".join(
        s if len(s) <= MAX_SUMMARY_SENTENCE else s[: MAX_SUMMARY_SENTENCE - 1].rstrip() + "…" for s in chosen
    )


def summarize(output: Any) -> str:
    """The best section's title and its sentences nearest the query; empty when nothing was found (or not ours)."""
    results = output.get("results") if isinstance(output, dict) else None
    if not isinstance(results, list) or not results or not isinstance(results[0], dict):
        return ""
    title, text = results[0].get("title"), results[0].get("text")
    if not isinstance(title, str) or not isinstance(text, str) or not text.strip():
        return ""
    query = output.get("query")
    return f'The AgentMesh docs say, under "{title}": {best_sentence(text, query if isinstance(query, str) else "")}'


def _ex(text: str) -> ToolExample:
    """A question and its call: the query is the question itself, as the router copies it."""
    return ToolExample(text, {"query": text.strip().rstrip("?.!")})


# Questions about AgentMesh itself, answered from its own docs.
EXAMPLES = (
    _ex("How does AgentMesh pick an inference replica?"),
    _ex("What port does the AgentMesh gateway listen on?"),
    _ex("which ports do the agentmesh services use"),
    _ex("How are rate limits enforced in AgentMesh?"),
    _ex("does agentmesh cache prompt prefixes?"),
    _ex("How big is a KV cache block on CPU in AgentMesh?"),
    _ex("What happens when AgentMesh is overloaded?"),
    _ex("What priority classes does the AgentMesh gateway support?"),
    _ex("How do sessions work in AgentMesh?"),
    _ex("What does the AgentMesh tool executor do when a tool times out?"),
    _ex("Is there a circuit breaker in the tool executor?"),
    _ex("Which tools are built into AgentMesh?"),
    _ex("Does the http_get tool protect against SSRF?"),
    _ex("How does the AgentMesh router decide which tools to call?"),
    _ex("how do I deploy agentmesh on kubernetes"),
    _ex("Which metrics does AgentMesh export, and where?"),
    _ex("How does AgentMesh handle deadlines across service hops?"),
    _ex("What happens to the work when an AgentMesh client cancels?"),
    _ex("How does authentication work at the AgentMesh gateway?"),
    _ex("What does the AgentMesh gateway do?"),
    _ex("give me an overview of the agentmesh architecture"),
    _ex("How does AgentMesh stream answer tokens back to the client?"),
    # Asked in the docs' own terms, without naming AgentMesh.
    _ex("What are the P0, P1 and P2 priorities for?"),
    _ex("Which priority class is dropped first under load?"),
    _ex("Why does the router send similar prompts to the same replica?"),
    _ex("How does the router balance load across inference replicas?"),
    _ex("Which RPC does a client call to talk to the agent?"),
    _ex("what's the metrics port of the router"),
)

NEGATIVE_EXAMPLES = (
    "What is the capital of France?",
    "Explain what a neural network is",
    "What is Kubernetes?",
    "How does gRPC work in general?",
    "What is a load balancer?",
    "Explain what caching is",
    "Who wrote Hamlet?",
    "Write a haiku about the ocean",
    "How do I bake sourdough bread?",
    "Tell me a joke",
    "What's 12 times 8?",
    "What time is it in Berlin?",
    "Fetch https://example.com/status",
)


def make_tool(folder: Path = KB_DIR) -> ToolDefinition:
    index = Bm25Index(load_sections(folder))

    async def kb_search(args: dict[str, Any]) -> dict[str, Any]:
        hits = index.search(str(args["query"]), int(args.get("top_k", 3)))
        return {
            "query": args["query"],
            "results": [
                {"source": s.source, "title": s.title, "score": round(score, 3), "text": s.text[:800]}
                for score, s in hits
            ],
        }

    return ToolDefinition(
        name="kb_search",
        description="Search the AgentMesh knowledge base (its documentation) and return the best sections.",
        parameters={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 500,
                    "description": "the user's question, as they asked it",
                    "x-agentmesh-copy": "message",
                },
                "top_k": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        fn=kb_search,
        timeout_s=2.0,
        cache_ttl_s=600.0,
        examples=EXAMPLES,
        negative_examples=NEGATIVE_EXAMPLES,
        summarize=summarize,
    )
