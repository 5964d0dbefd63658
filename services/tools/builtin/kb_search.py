"""kb_search: BM25 search over a local knowledge base of Markdown documents.

The shipped corpus (``services/tools/kb/``) is AgentMesh's own documentation,
split into sections at headings; the index is built once when the tool is
created. BM25 (k1 = 1.5, b = 0.75) needs no model and works offline.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.tools.registry import ToolDefinition

KB_DIR = Path(__file__).resolve().parent.parent / "kb"
WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "in", "is", "it", "of", "on",
     "or", "that", "the", "this", "to", "what", "when", "where", "which", "with"]
)  # fmt: skip


def words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOP]


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


class Bm25Index:
    def __init__(self, sections: list[Section], k1: float = 1.5, b: float = 0.75) -> None:
        self.sections = sections
        self.k1, self.b = k1, b
        self.docs = [Counter(words(s.title + " " + s.text)) for s in sections]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / len(self.lengths) if self.lengths else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def search(self, query: str, top_k: int) -> list[tuple[float, Section]]:
        terms = words(query)
        scored = []
        for doc, length, section in zip(self.docs, self.lengths, self.sections, strict=True):
            score = 0.0
            for t in terms:
                tf = doc.get(t, 0)
                if tf:
                    norm = tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * length / self.avg))
                    score += self.idf[t] * norm
            if score > 0:
                scored.append((score, section))
        scored.sort(key=lambda x: -x[0])
        return scored[:top_k]


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
                "query": {"type": "string", "minLength": 1, "maxLength": 500},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        fn=kb_search,
        timeout_s=2.0,
        cache_ttl_s=600.0,
    )
