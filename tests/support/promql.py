"""What a PromQL expression reads (its series selectors), and which series a /metrics page exports.

For the dashboard and alert tests, which check that every query names only
series the mesh exports. ``selectors`` tokenizes the expression and walks it:
an identifier is a metric name unless it is a function or aggregation (followed
by ``(``), a keyword or number literal, a label name (inside ``{...}`` or in the
list after ``by``, ``without``, ``on``, ``ignoring``, ``group_left``,
``group_right``) or part of a range (``[5m]``, ``[1h:1m]``). Strings and
Grafana variables (``$__rate_interval``, ``${datasource}``) are skipped. An
identifier followed by ``(`` that PromQL does not know raises ``ValueError``,
so a typo in a function name is caught rather than read as a metric.

``exported_names`` reads a text exposition into the sample names Prometheus
stores: the samples present, plus what each declared family yields by type (a
counter ``x`` → ``x_total``; a histogram → ``x_bucket``, ``x_sum``, ``x_count``),
so a labelled family that has not been used yet still counts as exported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

#: PromQL's functions and aggregation operators (a name followed by ``(`` that is neither is an error).
_FUNCTIONS = """
    abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes clamp clamp_max
    clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year days_in_month deg delta deriv
    double_exponential_smoothing end exp floor histogram_avg histogram_count histogram_fraction
    histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters hour idelta increase info
    irate label_join label_replace last_over_time ln log10 log2 mad_over_time max_over_time min_over_time minute
    month pi predict_linear present_over_time quantile_over_time rad rate resets round scalar sgn sin sinh sort
    sort_by_label sort_by_label_desc sort_desc sqrt start stddev_over_time stdvar_over_time sum_over_time tan
    tanh time timestamp vector year
"""
_AGGREGATIONS = "avg bottomk count count_values group limit_ratio limitk max min quantile stddev stdvar sum topk"
FUNCTIONS = frozenset(_FUNCTIONS.split())
AGGREGATIONS = frozenset(_AGGREGATIONS.split())
#: Followed by a parenthesised list of label names.
LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"})
#: The series Prometheus writes for every target it scrapes (and its alert state), not the target's own.
PROMETHEUS_OWN = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
        "ALERTS",
        "ALERTS_FOR_STATE",
    }
)
#: What a declared family of each type yields as sample names (``text_string_to_metric_families`` strips them).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<variable>\$\{[^}]*\}|\$\w+|\[\[\w+\]\])
  | (?P<duration>(?:[0-9]+(?:ms|[smhdwy]))+)
  | (?P<number>0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,(){}\[\]@])
    """,
    re.VERBOSE,
)
_PAIRS = {"(": ")", "{": "}", "[": "]"}


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


@dataclass(frozen=True)
class Selector:
    """One series selector: ``metric{label op "value", ...}``."""

    metric: str
    matchers: tuple[tuple[str, str, str], ...] = ()

    def equals(self, label: str) -> str | None:
        """The value this selector requires ``label`` to equal (``label="value"``), if it does."""
        return next((v for name, op, v in self.matchers if name == label and op == "="), None)


def tokenize(expr: str) -> list[Token]:
    """The expression's tokens, without space and comments; ``ValueError`` on a character PromQL lacks."""
    tokens: list[Token] = []
    at = 0
    while at < len(expr):
        match = _TOKEN.match(expr, at)
        if match is None:
            raise ValueError(f"unexpected {expr[at]!r} at {at} in {expr!r}")
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            tokens.append(Token(kind, match.group()))
        at = match.end()
    return tokens


def selectors(expr: str) -> list[Selector]:
    """The series selectors of a PromQL expression, in order (see module docstring)."""
    tokens = tokenize(expr)
    found: list[Selector] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        following = tokens[i + 1].text if i + 1 < len(tokens) else ""
        word = token.text.lower()
        if token.text == "{":  # a selector without a leading name: {__name__="x", ...}
            end = _closing(tokens, i, expr)
            found.append(_named_by_matchers(_matchers(tokens[i + 1 : end], expr), expr))
            i = end + 1
        elif token.text == "[":  # a range or subquery: durations and variables only
            i = _closing(tokens, i, expr) + 1
        elif token.text in _PAIRS.values() and token.text != ")":
            raise ValueError(f"unbalanced {token.text!r} in {expr!r}")
        elif token.kind != "name":
            i += 1
        elif word in LABEL_LISTS:
            i = _closing(tokens, i + 1, expr) + 1 if following == "(" else i + 1
        elif word in KEYWORDS:
            i += 1
        elif following == "(":
            if token.text not in FUNCTIONS and word not in AGGREGATIONS:
                raise ValueError(f"unknown PromQL function {token.text!r} in {expr!r}")
            i += 1
        elif word in AGGREGATIONS and following.lower() in ("by", "without"):
            i += 1
        elif following == "{":
            end = _closing(tokens, i + 1, expr)
            found.append(Selector(token.text, _matchers(tokens[i + 2 : end], expr)))
            i = end + 1
        else:
            found.append(Selector(token.text))
            i += 1
    _check_parentheses(tokens, expr)
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    return {s.metric for s in selectors(expr)}


def exported_names(exposition: str) -> set[str]:
    """The sample names a Prometheus text exposition exports (see module docstring)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def bucket_bounds(exposition: str) -> dict[str, set[str]]:
    """Each histogram's ``_bucket`` sample name → the ``le`` values exported, as Prometheus stores them."""
    bounds: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name.endswith("_bucket") and "le" in sample.labels:
                bounds.setdefault(sample.name, set()).add(sample.labels["le"])
    return bounds


def _closing(tokens: list[Token], opening: int, expr: str) -> int:
    """The index of the bracket closing the one at ``opening``."""
    want = _PAIRS[tokens[opening].text]
    depth = 0
    for j in range(opening, len(tokens)):
        if tokens[j].text == tokens[opening].text:
            depth += 1
        elif tokens[j].text == want:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unclosed {tokens[opening].text!r} in {expr!r}")


def _check_parentheses(tokens: list[Token], expr: str) -> None:
    depth = 0
    for token in tokens:
        depth += {"(": 1, ")": -1}.get(token.text, 0)
        if depth < 0:
            break
    if depth != 0:
        raise ValueError(f"unbalanced parentheses in {expr!r}")


def _matchers(tokens: list[Token], expr: str) -> tuple[tuple[str, str, str], ...]:
    """``label op "value"`` triples from the tokens between braces (a lone string is a quoted metric name)."""
    out: list[tuple[str, str, str]] = []
    group: list[Token] = []
    for token in [*tokens, Token("op", ",")]:
        if token.text != ",":
            group.append(token)
            continue
        if len(group) == 1 and group[0].kind == "string":
            out.append(("__name__", "=", _unquote(group[0].text)))
        elif len(group) == 3 and group[1].text in ("=", "!=", "=~", "!~") and group[2].kind == "string":
            label = _unquote(group[0].text) if group[0].kind == "string" else group[0].text
            out.append((label, group[1].text, _unquote(group[2].text)))
        elif group:
            raise ValueError(f"bad label matcher {' '.join(t.text for t in group)!r} in {expr!r}")
        group = []
    return tuple(out)


def _named_by_matchers(matchers: tuple[tuple[str, str, str], ...], expr: str) -> Selector:
    name = next((v for label, op, v in matchers if label == "__name__" and op == "="), None)
    if name is None:
        raise ValueError(f"a selector without a metric name in {expr!r}")
    return Selector(name, tuple(m for m in matchers if m[0] != "__name__"))


def _unquote(text: str) -> str:
    body = text[1:-1]
    return body if text.startswith("`") else re.sub(r"\\(.)", r"\1", body)
