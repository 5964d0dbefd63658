"""Configuration of the router (flags and AGENTMESH_ROUTER_* variables)."""

from __future__ import annotations

from dataclasses import dataclass

from services.router.planning.settings import PlanningSettings, SelectorSettings
from services.runtime.config import ConfigError, RedisConfig, fraction, non_negative, opt, port, positive


def flush_ms(value: float) -> None:
    """The replica holds text for at most 60 s (``SubmitGeneration.flush_interval``)."""
    if not 0 <= value <= 60_000:
        raise ValueError(f"{value} must be between 0 and 60000 (ms)")


@dataclass(frozen=True)
class RouterConfig(RedisConfig):
    """AgentMesh router: the agent loop, sessions, replica picking, response cache and failover."""

    ENV_PREFIX = "AGENTMESH_ROUTER_"
    SERVICE_NAME = "router"

    port: int = opt(50052, "gRPC port", check=port)
    metrics_port: int = opt(9152, "Prometheus /metrics port (0 picks a free one, -1 disables)")
    inference: tuple[str, ...] = opt(
        ("127.0.0.1:50054",),
        "inference replicas: host:port or dns:host:port (resolved and refreshed), comma-separated",
    )
    tools: str = opt("127.0.0.1:50053", "tool executors: host:port or dns:host:port (one stream per address)")
    dns_refresh_s: float = opt(10.0, "seconds between DNS refreshes of dns: replicas and tools", check=positive)
    tools_poll_s: float = opt(
        10.0, "seconds between ListTools polls of a tool executor without WatchTools (per tenant)", check=positive
    )
    picker: str = opt(
        "prefix",
        "replica placement: prefix (ours), round-robin or least-loaded (baselines)",
        choices=("prefix", "round-robin", "least-loaded"),
    )
    load_factor: float = opt(1.25, "bounded-load factor c: a replica above c × mean load is skipped", check=positive)
    session_ttl_s: float = opt(86_400.0, "seconds a session lives after its last turn", check=positive)
    history_budget_tokens: int = opt(1200, "history kept in the prompt, in (estimated) tokens", check=positive)
    history_keep: float = opt(
        0.5,
        "over budget, cut the history to this fraction of it at once, so its prefix stays cached (1: turn by turn)",
        check=fraction,
    )
    max_tool_rounds: int = opt(2, "default plan→act rounds per turn", check=positive)
    answer_max_tokens: int = opt(256, "default max_tokens of an answer", check=positive)
    answer_repetition_penalty: float = opt(
        1.1,
        "default repetition_penalty of answers without tool results or earlier turns (a first plain chat, Complete): "
        "greedy decoding on a small model echoes and loops there without one; 1.1 (EVAL.md, plain "
        "chat); 1: none",
        check=positive,
    )
    max_output_tokens: int = opt(1024, "largest max_tokens a client may ask for", check=positive)
    response_cache_ttl_s: float = opt(
        600.0, "seconds a deterministic response stays cached (0 disables)", check=non_negative
    )
    tool_timeout_s: float = opt(10.0, "time allowed for one tool call (retries included)", check=positive)
    client_tool_wait_s: float = opt(
        120.0,
        "how long a turn waits for the results of its client tool calls (capped by the turn's deadline)",
        check=positive,
    )
    max_client_tools: int = opt(128, "most client tools one turn may bring", check=positive)
    model_id: str = opt("SmolLM2-135M-Instruct", "model name, part of the response-cache key")
    stream_flush_ms: float = opt(
        100.0,
        "after the first text (sent at once), send answer text at most once per this many ms, merged"
        " (0: every engine step; at most 60000)",
        check=flush_ms,
    )
    tool_selection: str = opt(
        "embedding",
        "how tools are selected: embedding (classifier, the LLM only for ambiguous messages) or llm (always the LLM)",
        choices=("embedding", "llm"),
    )
    selector_choose: float = opt(0.45, "embedding selector: similarity that selects a tool", check=non_negative)
    selector_reject: float = opt(
        0.35, "embedding selector: best similarity below which no tool is needed", check=non_negative
    )
    selector_margin: float = opt(
        0.03, "embedding selector: lead the nearest no-tool example needs for no tool", check=non_negative
    )
    selector_overrule: float = opt(
        0.2, "embedding selector: lead of the nearest no-tool example that no intent word overrules", check=non_negative
    )
    selector_pin_lead: float = opt(
        0.06,
        "embedding selector: lead over the no-tool side that decides an ambiguous ask sharing a tool's intent word "
        "and naming the one value each of its copied arguments needs",
        check=non_negative,
    )
    selector_band_confidence: float = opt(
        0.75,
        "embedding selector: the card classifier's probability at which it decides an ambiguous message "
        "(a candidate tool or no tool) without a generation; 0: the generation decides every ambiguous message",
        check=non_negative,
    )
    selector_described_choose: float = opt(
        0.55,
        "embedding selector: --selector-choose for a tool that brings no example requests (described only)",
        check=non_negative,
    )
    selector_described_reject: float = opt(
        0.25,
        "embedding selector: --selector-reject for a tool that brings no example requests (described only)",
        check=non_negative,
    )
    selector_described_lead: float = opt(
        0.08,
        "embedding selector: the lead over every other tool that chooses a described-only tool with no intent word",
        check=non_negative,
    )
    selector_described_words: float = opt(
        0.05,
        "embedding selector: the weight of a described-only tool's word score (the rare words a message shares "
        "with its name, description and parameters) added to its cosine similarity; 0: the cosine alone",
        check=non_negative,
    )
    selector_described_action: float = opt(
        0.1,
        "embedding selector: what a described-only tool's score gains when the message's opening verb does what "
        "the tool's name says (find / search_tickets), and loses when the two differ (find / create_ticket); 0: off",
        check=non_negative,
    )
    selector_band_candidates: int = opt(
        1,
        "embedding selector: how many of the best-ranked candidate tools the LLM judge is shown when it decides "
        "a message the other judges left open (1: the embedding ranks which tool, the model judges whether)",
        check=positive,
    )
    selector_likelihood_candidates: int = opt(
        5,
        "likelihood judge: how many of the best-ranked candidate tools it reorders by how likely the message is "
        "as a request written for each (one scoring on a replica per candidate)",
        check=positive,
    )
    selector_likelihood_weight: float = opt(
        0.5,
        "likelihood judge: the weight of the model's per-token log-probability of the message beside the card "
        "score; 0: off",
        check=non_negative,
    )
    selector_whether_floor: float = opt(
        0.1,
        "whether judge: a tool described only is not chosen for a message the ask classifier gives less than this "
        "probability of asking for something a tool does; 0: off",
        check=non_negative,
    )
    judges: tuple[str, ...] = opt(
        (),
        "the planning judges in order, comma-separated, from similarity, schema, classifier, whether, likelihood, llm "
        "(default: the --tool-selection mode's chain)",
    )
    answer_opening: bool = opt(True, "open answers with the tools' own summaries of their results")
    share_prefix_cache: bool = opt(
        False, "share replicas' prefix caches across tenants (default: salted per tenant; see SECURITY.md)"
    )

    def validate(self) -> None:
        if not self.inference:
            raise ConfigError("--inference: at least one inference replica is required")
        try:
            self.planning()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def planning(self) -> PlanningSettings:
        """The planning settings these flags name (validated there, once)."""
        selector = SelectorSettings(
            choose=self.selector_choose,
            reject=self.selector_reject,
            margin=self.selector_margin,
            overrule=self.selector_overrule,
            pin_lead=self.selector_pin_lead,
            band_confidence=self.selector_band_confidence,
            described_choose=self.selector_described_choose,
            described_reject=self.selector_described_reject,
            described_lead=self.selector_described_lead,
            described_words=self.selector_described_words,
            described_action=self.selector_described_action,
            band_candidates=self.selector_band_candidates,
            likelihood_candidates=self.selector_likelihood_candidates,
            likelihood_weight=self.selector_likelihood_weight,
            whether_floor=self.selector_whether_floor,
        )
        if self.judges:
            return PlanningSettings(judges=self.judges, selector=selector)
        return PlanningSettings.for_mode(self.tool_selection, selector=selector)
