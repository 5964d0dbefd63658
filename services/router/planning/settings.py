"""Planning's settings, validated once: the similarity judge's thresholds and the judge chain.

``RouterConfig`` builds one ``PlanningSettings`` from its flags; a bad value is a
``ValueError`` with one line naming the flag, which the config turns into its
own error. Nothing else validates these numbers again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The judges a chain may name, in the order the default embedding chain runs them.
JUDGE_NAMES = ("similarity", "schema", "classifier", "whether", "likelihood", "llm")
#: The chain of each selection mode: the mode is which judges run, nothing else.
MODE_CHAINS: dict[str, tuple[str, ...]] = {
    "embedding": ("similarity", "schema", "classifier", "whether", "likelihood", "llm"),
    "llm": ("llm",),
}


@dataclass(frozen=True)
class SelectorSettings:
    """Cosine-similarity thresholds (all-MiniLM-L6-v2 scale)."""

    choose: float = 0.45
    reject: float = 0.35
    #: The lead the "not this tool" side needs over the best tool for "no tool".
    margin: float = 0.03
    #: A lead of "not this tool" that no intent word overrules: "What color is the sky on a clear day?" shares
    #: a time word but is 0.27 nearer a no-tool example than any time ask.
    overrule: float = 0.2
    #: The lead over "not this tool" that decides a band ask for a tool when the ask shares the tool's intent
    #: word and names the one value each copied argument needs (``copying.pinned``).
    pin_lead: float = 0.06
    #: The card classifier's probability at which its verdict decides an ambiguous message (a candidate tool, or
    #: no tool) instead of a generation; 0 leaves the whole band to the generation.
    band_confidence: float = 0.75
    #: ``choose`` and ``reject`` for a tool described only (no example requests): a message is compared with a
    #: description then, and those similarities run lower (calibrated on the generality eval's dev split).
    described_choose: float = 0.55
    described_reject: float = 0.25
    #: A tool described only is also chosen, with no intent word of its own in the text, when it scores at least
    #: ``described_choose`` and leads every other tool by this much: the embedding alone is unambiguous then.
    described_lead: float = 0.08
    #: The weight of a described tool's word score (``lexical.py``) added to its cosine similarity; 0 turns it off.
    described_words: float = 0.05
    #: What a described tool's score gains when the message's opening verb does what the tool's name says it
    #: does ("find ..." and ``search_tickets``), and loses when both are plain and differ ("find ..." and
    #: ``create_ticket``): ``Language.action``. 0 turns it off.
    described_action: float = 0.1
    max_tools: int = 3
    #: How many of the best-ranked candidates the LLM judge is shown when it decides a message, or a clause of one,
    #: that the judges before it left open (``judges/llm.py``): 1 lets the embedding rank which tool and the model
    #: judge whether.
    band_candidates: int = 1
    #: The likelihood judge (``judges/likelihood.py``): how many of the best-ranked candidates it reorders, and the
    #: weight of the model's per-token log-probability of the message, written for each, beside the card score
    #: (0.5 best of 0.1-0.5 on the band's turns of the generality dev split and the spent blind sets).
    likelihood_candidates: int = 5
    likelihood_weight: float = 0.5
    #: The whether judge (``judges/whether.py``): a tool described only is not chosen, nor left to the band, for a
    #: message the ask classifier gives less than this probability of asking for something a tool does; 0 is off.
    whether_floor: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 <= self.reject <= self.choose <= 1.0:
            raise ValueError("--selector-reject and --selector-choose: need reject <= choose <= 1")
        if not 0.0 <= self.described_reject <= self.described_choose <= 1.0:
            raise ValueError("--selector-described-reject and --selector-described-choose: need reject <= choose <= 1")
        if not 0 <= self.margin <= self.overrule:
            raise ValueError("--selector-overrule: must be at least --selector-margin")
        if not 0 <= self.described_lead <= 1:
            raise ValueError("--selector-described-lead: must be between 0 and 1")
        if not 0 <= self.pin_lead <= self.overrule:
            raise ValueError("--selector-pin-lead: must be between 0 and --selector-overrule")
        if not (self.band_confidence == 0 or 0.5 <= self.band_confidence <= 1.0):
            raise ValueError("--selector-band-confidence: must be 0 (off) or between 0.5 and 1")
        if not 0 <= self.described_words <= 1:
            raise ValueError("--selector-described-words: must be between 0 and 1")
        if not 0 <= self.described_action <= 1:
            raise ValueError("--selector-described-action: must be between 0 and 1")
        if self.max_tools < 1:
            raise ValueError("max_tools: must be at least 1")
        if not 2 <= self.likelihood_candidates <= 20:
            raise ValueError("--selector-likelihood-candidates: must be between 2 and 20")
        if not 0 <= self.likelihood_weight <= 10:
            raise ValueError("--selector-likelihood-weight: must be between 0 and 10 (0: off)")
        if not 0 <= self.whether_floor < 1:
            raise ValueError("--selector-whether-floor: must be at least 0 (0: off) and below 1")
        if not 1 <= self.band_candidates <= self.max_tools:
            raise ValueError(f"--selector-band-candidates: must be between 1 and {self.max_tools}")


@dataclass(frozen=True)
class PlanningSettings:
    """Which judges decide, in which order, and the similarity judge's thresholds."""

    judges: tuple[str, ...] = MODE_CHAINS["embedding"]
    selector: SelectorSettings = field(default_factory=SelectorSettings)
    fill_max_tokens: int = 160
    language: str = "en"

    def __post_init__(self) -> None:
        if not self.judges:
            raise ValueError("--judges: name at least one judge")
        unknown = [j for j in self.judges if j not in JUDGE_NAMES]
        if unknown:
            raise ValueError(f"--judges: unknown judge {unknown[0]!r}; known: {', '.join(JUDGE_NAMES)}")
        if len(set(self.judges)) != len(self.judges):
            raise ValueError("--judges: a judge is named twice")
        if "llm" in self.judges and self.judges[-1] != "llm":
            raise ValueError("--judges: llm decides whatever is left, so it must come last")
        band = [j for j in self.judges if j in ("schema", "classifier", "whether", "likelihood")]
        if band and "similarity" not in self.judges:
            raise ValueError(f"--judges: {band[0]} judges the similarity judge's band, so similarity must run")
        if "similarity" in self.judges and self.judges[0] != "similarity":
            raise ValueError("--judges: similarity makes the first verdict, so it must come first")

    @property
    def embeds(self) -> bool:
        """Whether messages are embedded at all (the similarity judge runs)."""
        return "similarity" in self.judges

    @classmethod
    def for_mode(cls, mode: str, **kwargs: object) -> PlanningSettings:
        """The settings of a selection mode (``embedding`` or ``llm``)."""
        if mode not in MODE_CHAINS:
            raise ValueError(f"--tool-selection: unknown mode {mode!r}; known: {', '.join(MODE_CHAINS)}")
        return cls(judges=MODE_CHAINS[mode], **kwargs)  # type: ignore[arg-type]
