"""Secrets kept out of what slotop shows, logs and records: URLs, command lines, free text (pure).

`shown_url` is the one way a URL is written anywhere a person or a file sees it: without user
info, and with the value of a query parameter that names a key, token or password hidden.
`redact_argv` hides the value of every argument that looks like a secret (`--api-key X`,
`--hf-token=X`, `token=X`, a URL with a password). A `Scrubber` is the last guard for text that
comes from outside (a replica's log, an error message, an answer's body): it replaces each known
secret value wherever it appears, in its plain and its JSON-escaped form.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

REDACTED = "<redacted>"
SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pass", "pwd", "auth", "bearer"}
)
"""Words that make a flag, a variable or a query parameter name a secret (`--api-key`, `HF_TOKEN`,
`?access_token=`); `tokens` is not one of them (`--max-num-batched-tokens` is a count)."""
MIN_SCRUBBED_CHARS = 6
"""Values shorter than this are not searched for in free text: replacing a two-letter value
everywhere would mangle the text around it, and so short a value is no secret to keep."""
_WORD = re.compile(r"[a-z0-9]+")
_NUMBER_LIKE = re.compile(r"[0-9.,:+\-eE]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s,;'\"]+")
_URL_USER_INFO = re.compile(r"(://)[^/?#\s]*@")


def names_a_secret(name: str) -> bool:
    """Whether a flag, variable or parameter name says its value is a secret."""
    words = _WORD.findall(name.lower())
    return any(word in SECRET_WORDS for word in words) or "apikey" in name.lower()


def shown_url(url: str) -> str:
    """The URL as slotop shows and records it: no user info, secret query values hidden."""
    text = _without_user_info(url)
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if not parts.query:
        return text
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if not any(names_a_secret(name) for name, _ in pairs):
        return text
    hidden = [(name, REDACTED if names_a_secret(name) else value) for name, value in pairs]
    return urlunsplit(parts._replace(query=urlencode(hidden, safe="<>")))


def _without_user_info(text: str) -> str:
    """Drop `user:password@` from the authority of a URL (with or without its scheme)."""
    start = text.find("://")
    start = 0 if start < 0 else start + 3
    end = len(text)
    for stop in "/?#":
        found = text.find(stop, start)
        if found >= 0:
            end = min(end, found)
    at = text.rfind("@", start, end)
    if at < 0:
        return text
    return text[:start] + text[at + 1 :]


def url_password(url: str) -> str | None:
    """The password a URL carries, None when it carries none."""
    try:
        password = urlsplit(url if "://" in url else "http://" + url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def url_user_info(url: str) -> str | None:
    """`user:password` as a URL carries it (decoded), None when it carries neither."""
    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return None
    return f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"


def _secret_spans(argv: Sequence[str]) -> list[tuple[int, str]]:
    """Where a command line holds secrets: (argument index, the secret value in it)."""
    spans: list[tuple[int, str]] = []
    for index, argument in enumerate(argv):
        name, equals, value = argument.partition("=")
        following = argv[index + 1] if index + 1 < len(argv) else None
        if argument.startswith("-") and names_a_secret(name):
            if equals:
                spans.append((index, value))
            elif following is not None and not following.startswith("--"):
                spans.append((index + 1, following))  # `--api-key X`; a bare flag holds none
        elif equals and name and "/" not in name and names_a_secret(name):
            spans.append((index, value))  # `token=X`, `HF_TOKEN=X`
        else:
            spans += [(index, p) for p in map(url_password, _URL.findall(argument)) if p]
    return spans


def password_warning(url: str) -> str | None:
    """What to say of a replica URL that carries a password (None when it carries none)."""
    if url_password(url) is None:
        return None
    return (
        "the replica URL carries a password; slotop sends it as basic auth and never shows or "
        "records it, but a command line is seen in `ps` and shell history: give the replica's "
        "API key in the environment variable [replica] api_key_env names (VLLM_API_KEY by "
        "default) instead"
    )


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the value of every secret-looking argument hidden.

    `--api-key X` and `--api-key=X` (any flag whose name says key, token, secret, password or
    auth), `NAME=X` where NAME says so (`token=X`, `HF_TOKEN=X`), and a URL's user info.
    """
    out = [_urls_without_user_info(a) if "://" in a else a for a in argv]
    for index, _ in _secret_spans(argv):
        argument = argv[index]
        name, equals, _value = argument.partition("=")
        if "://" in argument and not names_a_secret(name):
            continue  # a URL: its user info is already gone
        out[index] = f"{name}={REDACTED}" if equals and names_a_secret(name) else REDACTED
    return out


def _urls_without_user_info(argument: str) -> str:
    """An argument with the user info of every URL in it dropped (`--url=http://u:p@h`)."""
    return _URL_USER_INFO.sub(r"\1", argument)


def shown_text(text: str) -> str:
    """Free text (a library's error message) with the user info of every URL in it dropped."""
    return _urls_without_user_info(text) if "://" in text else text


def shown_command(argv: Sequence[str]) -> str:
    """A command line in one string as slotop shows it: secrets hidden, arguments space-joined."""
    return " ".join(redact_argv(argv))


def argv_secrets(argv: Sequence[str]) -> list[str]:
    """The values `redact_argv` hides in a command line."""
    return [value for _, value in _secret_spans(argv) if value]


class Scrubber:
    """Replaces known secret values in text: the guard on everything that came from outside."""

    __slots__ = ("_forms",)

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if not secret or len(secret) < MIN_SCRUBBED_CHARS:
                continue
            if _NUMBER_LIKE.fullmatch(secret):
                continue  # a number: replacing it could break the numbers around it
            forms.add(secret)
            forms.add(json.dumps(secret)[1:-1])  # as it stands inside a JSON string
        self._forms = tuple(sorted(forms, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __or__(self, other: Scrubber) -> Scrubber:
        joined = Scrubber()
        joined._forms = tuple(sorted(set(self._forms) | set(other._forms), key=len, reverse=True))
        return joined

    def __call__(self, text: str) -> str:
        """The text with every known secret replaced by <redacted>."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return text


NO_SECRETS = Scrubber()
"""A scrubber that knows no secret and changes nothing."""
