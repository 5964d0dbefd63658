"""Currencies as English writes them, and the ISO 4217 codes they stand for.

Why: a tool that takes a currency takes its code ("ISO 4217 code such as
EUR"), and people write the name ("how many yen for 500 euros?") or a sign
("€40"). Copied as written, "euros" is no code; composed by the 135M model,
the code was often the wrong one or the property's default. Read here, a
currency the user names is the code a currency property takes, and the code
is grounded by the name. The table holds the currencies people name most; a
code written as such ("USD", "usd") is read for every currency in it.
"""

from __future__ import annotations

import re

#: Each code, then how English writes the currency: names (singular and plural) and signs.
_WRITTEN: dict[str, tuple[str, ...]] = {
    "USD": ("dollar", "dollars", "us dollar", "us dollars", "buck", "bucks", "$", "us$"),
    "EUR": ("euro", "euros", "€"),
    "GBP": ("pound", "pounds", "pound sterling", "sterling", "british pound", "british pounds", "quid", "£"),
    "JPY": ("yen", "japanese yen", "¥"),
    "CNY": ("yuan", "renminbi", "rmb", "chinese yuan"),
    "CHF": ("swiss franc", "swiss francs", "franc", "francs"),
    "CAD": ("canadian dollar", "canadian dollars", "c$"),
    "AUD": ("australian dollar", "australian dollars", "aussie dollar", "aussie dollars", "a$"),
    "NZD": ("new zealand dollar", "new zealand dollars", "nz dollar", "nz dollars", "nz$"),
    "HKD": ("hong kong dollar", "hong kong dollars", "hk$"),
    "SGD": ("singapore dollar", "singapore dollars", "s$"),
    "INR": ("rupee", "rupees", "indian rupee", "indian rupees", "₹"),
    "KRW": ("korean won", "south korean won", "₩"),
    "MXN": ("peso", "pesos", "mexican peso", "mexican pesos"),
    "BRL": ("brazilian real", "brazilian reais", "reais"),
    "SEK": ("swedish krona", "swedish kronor", "krona", "kronor"),
    "NOK": ("norwegian krone", "norwegian kroner"),
    "DKK": ("danish krone", "danish kroner"),
    "PLN": ("zloty", "zlotys", "zlotych", "polish zloty"),
    "CZK": ("czech koruna", "czech crowns", "koruna"),
    "HUF": ("forint", "forints", "hungarian forint"),
    "RUB": ("ruble", "rubles", "rouble", "roubles", "₽"),
    "TRY": ("turkish lira", "lira", "₺"),
    "ILS": ("shekel", "shekels", "israeli shekel", "₪"),
    "AED": ("dirham", "dirhams", "uae dirham"),
    "SAR": ("riyal", "riyals", "saudi riyal"),
    "ZAR": ("rand", "south african rand"),
    "THB": ("baht", "thai baht", "฿"),
    "IDR": ("rupiah", "indonesian rupiah"),
    "MYR": ("ringgit", "malaysian ringgit"),
    "PHP": ("philippine peso", "philippine pesos"),
    "VND": ("dong", "vietnamese dong", "₫"),
}
#: Codes that are also English words: read only in upper case ("TRY", never "try").
_WORD_CODES = frozenset({"TRY"})


#: A text's tokens as the table writes them: a writing of letters and a sign ("us$", "c$", not "abc$"), a word of
#: letters, or a sign.
_SIGNED = sorted(
    (w for names in _WRITTEN.values() for w in names if len(w) > 1 and not w[-1].isalpha()), key=len, reverse=True
)
_TOKEN = re.compile("|".join(rf"(?<![^\W\d_]){re.escape(w)}" for w in _SIGNED) + r"|[^\W\d_]+|[^\w\s]", re.IGNORECASE)
#: Each writing (lower case, words one space apart) and each code (lower case), with its code.
_CODE_OF = {w: code for code, names in _WRITTEN.items() for w in names} | {c.lower(): c for c in _WRITTEN}
#: The most tokens a writing has ("south african rand").
_LONGEST = max(len(_TOKEN.findall(w)) for w in _CODE_OF)

#: A property's name or description that says it takes a currency's code: "ISO 4217", or "currency code" as a
#: phrase ("a promo code, in the user's currency" takes none).
_TAKES_CODE = re.compile(r"\b(?:iso\s*4217|currenc(?:y|ies)\s+codes?)\b", re.IGNORECASE)


def currency_codes(text: str) -> list[str]:
    """The codes of the currencies ``text`` names, in the order first named ("500 euros in yen": EUR, JPY): its
    tokens read left to right, the longest writing first ("swiss francs" before "francs"). A dictionary lookup
    per token, not one pattern of every writing: grounding reads every filled call's conversation."""
    tokens = _TOKEN.findall(text)
    found: list[str] = []
    i = 0
    while i < len(tokens):
        for n in range(min(_LONGEST, len(tokens) - i), 0, -1):
            written = " ".join(tokens[i : i + n])
            code = _CODE_OF.get(written.lower())
            if code is None:
                continue
            if code in _WORD_CODES and written.upper() == code and written != code:
                continue  # "try", "Try": the word, not the code
            if code not in found:
                found.append(code)
            i += n - 1
            break
        i += 1
    return found


def takes_currency_code(text: str) -> bool:
    """Whether a property's name and description (``text``) say it takes a currency's code ("ISO 4217 code",
    "ISO currency code"), so a currency named in words is given as its code."""
    return bool(_TAKES_CODE.search(text))
