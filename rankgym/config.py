"""TOML config files mapped onto typed pydantic config objects.

`load_config(path, Model)` reads a TOML file and validates it against ``Model`` (whose
``model_config`` should forbid extra keys). Any problem becomes one :class:`ConfigError`
naming the file, the dotted key, what was wrong and, for enumerations, the allowed values.
"""

from __future__ import annotations

import math
import tomllib
import typing
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rankgym.credentials import find_credentials, redact
from rankgym.errors import UserError

M = TypeVar("M", bound=BaseModel)


class ConfigError(UserError):
    """A config file that cannot be used as it is."""


def _allowed(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """Allowed values of a Literal-typed field at ``loc``, if it is one."""
    cur: Any = model
    ann: Any = None
    for part in loc:
        if not (isinstance(cur, type) and issubclass(cur, BaseModel)):
            return None
        field = cur.model_fields.get(str(part))
        if field is None:
            return sorted(cur.model_fields)
        ann = field.annotation
        cur = ann
    for cand in (ann, *typing.get_args(ann)):
        if typing.get_origin(cand) is typing.Literal:
            return [str(a) for a in typing.get_args(cand)]
    return None


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (a pasted blob stays a one-line error)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def non_finite_key(data: Any) -> str | None:
    """Dotted key of the first ``inf``/``nan`` number anywhere in ``data``, or None.

    TOML spells ``inf`` and ``nan``; no rankgym setting means anything with them (an
    ``lr = inf`` trained an all-NaN adapter without a word), so they are refused everywhere,
    env kwargs included, before the model sees the data. Iterative: deep nesting is fine.
    """
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path or "(top level)"
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, (list, tuple)):
            items = enumerate(value)
        else:
            continue
        stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(list(items)))
    return None


def validate_config(data: dict[str, Any], model: type[M], source: str = "config") -> M:
    """Validate a dict against ``model``; raise :class:`ConfigError` with readable messages.

    Any ``inf``/``nan`` number in ``data`` is refused first, naming its key, and so is any
    credential (``rankgym.credentials``: an ``api_key``-like key, a URL with ``user:pass@``).
    """
    bad = non_finite_key(data)
    if bad is not None:
        raise ConfigError(
            f"{source}: bad value for '{bad}': numbers must be finite (got inf or nan); "
            "give a finite number or leave the key out"
        )
    secrets = find_credentials(data)
    if secrets:
        raise ConfigError(
            f"{source}: '{secrets[0]}' holds a credential, which would be written to run.json and "
            "the store; put the key in an environment variable (router deployments: "
            'api_key_env = "VAR"; providers: their usual variable, e.g. OPENAI_API_KEY) and '
            "drop user:password@ from URLs"
        )
    try:
        return model.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(top level)"
            if err["type"] == "extra_forbidden":
                parent = tuple(err["loc"][:-1])
                allowed = _allowed(model, (*parent, "__nope__")) or []
                lines.append(f"unknown key '{key}'; allowed keys here: {', '.join(allowed)}")
            else:
                msg = (
                    f"bad value for '{key}': {err['msg']} (got {_short(redact(err.get('input')))})"
                )
                choices = _allowed(model, tuple(err["loc"])) or (err.get("ctx") or {}).get(
                    "allowed"
                )  # a Literal field, or a validator that names its choices (reward.kind)
                if choices and err["type"] == "literal_error":
                    msg += f"; allowed values: {', '.join(choices)}"
                lines.append(msg)
        raise ConfigError(f"{source}: " + "; ".join(lines)) from None


def load_config(path: str | Path, model: type[M]) -> M:
    """Read a TOML file into ``model``; errors name the file and key."""
    p = Path(path)
    if not p.is_file():
        what = "is a directory, not a file" if p.is_dir() else "does not exist"
        raise ConfigError(f"config file {str(p)!r} {what}")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"config file {str(p)!r} cannot be read: {e.strerror or e}") from None
    return parse_config(raw, model, source=str(p))


def parse_config(raw: bytes | str, model: type[M], source: str = "config") -> M:
    """Parse TOML text (bytes must be UTF-8) into ``model``; every failure is a ConfigError."""
    if isinstance(raw, bytes):
        encoded = raw
        try:
            raw = encoded.decode("utf-8")
        except UnicodeDecodeError as e:
            line = encoded[: e.start].count(b"\n") + 1
            raise ConfigError(
                f"{source}: not UTF-8 text (byte {encoded[e.start]:#04x} on line {line}); "
                "save the file as UTF-8"
            ) from None
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: not valid TOML: {e}") from None
    return validate_config(data, model, source=source)
