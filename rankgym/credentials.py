"""Keep credentials off the disk: find them in a config, refuse them at load, redact them at write.

A key belongs in an environment variable named by ``api_key_env`` (router deployments) or read
by LiteLLM from the provider's usual variable (``OPENAI_API_KEY``...), never in a file: a
config is copied into ``run.json``, the store's ``runs.config`` (which the dashboard shows and
``rankgym export`` ships) and checkpoints. So:

- :func:`find_credentials` lists the dotted keys of a config (any nesting) that hold one: a
  key named like a credential (``api_key``, ``token``, ``password``, ``secret``,
  ``authorization``, ``*_api_key``, ``*_secret``...; not ``*_env``, which names a variable) with
  a non-empty value, or a URL with ``user:password@`` or a credential-named query parameter;
- ``rankgym.config.validate_config`` refuses a config holding one, naming the key (the message
  never repeats the value);
- :func:`redact` replaces them with ``"<redacted>"`` (URLs keep scheme, host and path): the
  writers of ``run.json`` and ``runs.config`` call it, so a config built in Python without
  validation is still stored clean.

What it does not do: recognise a key pasted under an innocent name (``note = "sk-..."``) or
inside free text such as a rubric; scrub logs, exceptions or the environment.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["REDACTED", "find_credentials", "is_credential_key", "redact", "url_has_credentials"]

REDACTED = "<redacted>"

_EXACT = {
    "api_key", "apikey", "token", "access_token", "auth_token", "bearer", "bearer_token",
    "refresh_token", "id_token", "session_token", "hf_token", "password", "passwd", "secret",
    "client_secret", "authorization", "credentials", "private_key", "secret_key",
    "access_key", "aws_secret_access_key", "aws_session_token", "x_api_key",
}  # fmt: skip
_SUFFIXES = ("_api_key", "_apikey", "_secret", "_password", "_passwd", "_secret_key",
             "_access_token", "_auth_token", "_private_key")  # fmt: skip


def is_credential_key(name: str) -> bool:
    """Whether a setting called ``name`` would hold a credential (``api_key_env`` would not)."""
    k = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if k.endswith("_env"):
        return False
    return k in _EXACT or k.endswith(_SUFFIXES)


def url_has_credentials(text: str) -> bool:
    """Whether ``text`` is a URL with ``user:password@`` or a credential-named query parameter."""
    if "://" not in text:
        return False
    try:
        parts = urlsplit(text.strip())
    except ValueError:
        return "@" in text.split("://", 1)[1].split("/", 1)[0]
    if "@" in parts.netloc:
        return True
    return any(is_credential_key(k) for k, _ in parse_qsl(parts.query, keep_blank_values=True))


def _redact_url(text: str) -> str:
    try:
        parts = urlsplit(text.strip())
    except ValueError:
        return REDACTED
    host = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode(
        [
            (k, REDACTED if is_credential_key(k) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]  # fmt: skip
    )
    return urlunsplit((parts.scheme, (REDACTED + "@" if "@" in parts.netloc else "") + host, parts.path, query, parts.fragment))  # fmt: skip


def _walk(data: Any) -> list[tuple[str, str, Any]]:
    """(dotted key, last key, value) of every leaf; iterative (deep nesting is fine)."""
    out, stack = [], [("", "", data)]
    while stack:
        path, key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), str(k), v) for k, v in reversed(list(value.items())))  # fmt: skip
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}.{i}" if path else str(i), key, v) for i, v in reversed(list(enumerate(value))))  # fmt: skip
        else:
            out.append((path, key, value))
    return out


def _is_secret(key: str, value: Any) -> bool:
    if isinstance(value, str) and url_has_credentials(value):
        return True
    return is_credential_key(key) and value not in (None, "", False) and not isinstance(value, (int, float))  # fmt: skip


def find_credentials(data: Any) -> list[str]:
    """Dotted keys of ``data`` that hold a credential (see the module docstring), in order."""
    return [path for path, key, value in _walk(data) if _is_secret(key, value)]


def redact(data: Any) -> Any:
    """A copy of ``data`` (dicts, lists, scalars) with every credential replaced by ``"<redacted>"``."""
    if isinstance(data, dict):
        return {
            k: (_redact_url(v) if isinstance(v, str) and url_has_credentials(v) else REDACTED)
            if _is_secret(str(k), v)
            else redact(v)
            for k, v in data.items()
        }
    if isinstance(data, (list, tuple)):
        return [_redact_url(v) if isinstance(v, str) and url_has_credentials(v) else redact(v) for v in data]  # fmt: skip
    if isinstance(data, str) and url_has_credentials(data):
        return _redact_url(data)
    return data
