"""Core data types: messages, turns, trajectories, groups, judge specs and judgements.

Every type is a pydantic model: it validates what comes from outside (a JSONL file, a judge
response, a plugin env) and round-trips through JSON unchanged (`to_json` / `from_json`).
Each serialised object carries `schema_version`; readers accept older versions and upgrade.

What this module does not do: it does not persist anything (see `rankgym.store`) and it does
not compute scores or rewards (see `rankgym.judges` and `rankgym.trainer`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticSerializationError

from rankgym.judge_backend import parse_model

SCHEMA_VERSION = 1

SCORE_TIE = 1e-9
"""Two scores or rewards closer than this count as equal: a judge's tie, a group whose verifier
rewards are constant, the judge's top trajectory."""

Role = Literal["system", "user", "assistant", "tool"]


def new_id(prefix: str) -> str:
    """A short random id such as ``traj-3f9a0c1b2d4e``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the input to every content hash."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(obj: Any) -> str:
    """SHA-256 (first 16 hex digits) of the canonical JSON of ``obj``."""
    text = canonical_json(obj)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Text with surrogates (not valid Unicode) still hashes, and hashes as its JSON round
        # trip does: a pair of surrogate code points counts as the character it encodes.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:16]


def escaped_json(data: Any) -> str:
    """Compact, ASCII-only JSON: a lone surrogate (invalid Unicode) becomes a ``\\udXXX`` escape.

    The fallback where pydantic's own serializer refuses such text; ``json.loads`` reads it back.
    """
    return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str)


def reparse_json(error: ValidationError, text: str | bytes) -> Any:
    """Parse ``text`` with ``json.loads`` when pydantic refused it only as JSON (it rejects
    lone-surrogate escapes that :func:`escaped_json` writes); otherwise re-raise ``error``."""
    if not any(err["type"] == "json_invalid" for err in error.errors()):
        raise error
    try:
        return json.loads(text)
    except ValueError:
        raise error from None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (a lone surrogate stays as it is; see :meth:`to_json`)."""
        try:
            return self.model_dump(mode="json")
        except (UnicodeEncodeError, PydanticSerializationError):
            out: dict[str, Any] = json.loads(escaped_json(self.model_dump()))
            return out

    def to_json(self) -> str:
        """Compact JSON; a lone surrogate in any text is written as a ``\\udXXX`` escape."""
        try:
            out = self.model_dump_json()
        except PydanticSerializationError:
            return escaped_json(self.model_dump())
        # pydantic writes a lone surrogate in a dict *key* as U+FFFD instead of refusing it
        return escaped_json(self.model_dump()) if "\ufffd" in out else out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        return cls.model_validate(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> Any:
        """Parse :meth:`to_json` output (lone-surrogate escapes included)."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as e:
            return cls.model_validate(reparse_json(e, text))


class ToolCallFunction(_Model):
    name: str
    arguments: str = "{}"
    """JSON-encoded arguments, exactly as the OpenAI format carries them."""


class ToolCall(_Model):
    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class Message(_Model):
    """One chat message in OpenAI format."""

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The dict an OpenAI-compatible API or chat template expects (None fields dropped)."""
        return self.model_dump(mode="json", exclude_none=True)


def assistant_call(
    name: str, arguments: dict[str, Any], call_id: str = "call_0", content: str | None = None
) -> dict[str, Any]:
    """An OpenAI assistant message that makes one native tool call (for oracles and scripts).

    ``arguments`` is encoded as the JSON string the OpenAI format carries. Also importable as
    ``rankgym.envs.toolcalls.assistant_call``.
    """
    fn = {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}
    call = {"id": call_id, "type": "function", "function": fn}
    return {"role": "assistant", "content": content, "tool_calls": [call]}


class Turn(_Model):
    """One assistant generation: the exact tokens the policy saw and produced.

    ``completion_logprobs`` are the sampler's log-probabilities of ``completion_token_ids``
    (needed for the GRPO importance ratio). ``message_index`` points at the assistant message
    this turn produced inside ``Trajectory.messages``.
    """

    message_index: int
    prompt_token_ids: list[int] = Field(default_factory=list)
    completion_token_ids: list[int] = Field(default_factory=list)
    completion_logprobs: list[float] = Field(default_factory=list)
    policy: str | None = None
    """Which policy (and adapter step) produced this turn, e.g. ``embedded@step3``."""

    @field_validator("completion_logprobs")
    @classmethod
    def _finite(cls, v: list[float]) -> list[float]:
        return [float(x) for x in v]


class Trajectory(_Model):
    """One full episode of an agent in an env, as the judge and the trainer see it."""

    schema_version: int = SCHEMA_VERSION
    id: str = Field(default_factory=lambda: new_id("traj"))
    env_id: str
    task_id: str
    seed: int | None = None
    messages: list[Message]
    turns: list[Turn] = Field(default_factory=list)
    verifiable_reward: float | None = None
    metrics: dict[str, float | int | None] = Field(default_factory=dict)
    hack_signals: list[str] = Field(default_factory=list)
    truncated: bool = False
    error: str | None = None

    def verifier_outcome(self) -> float | None:
        """The verifier's label of this episode: its ``verifiable_reward``; 0.0 for one cut at
        its turn limit that the env left unscored (``truncated``: "never answers" is a failure;
        an env that scores such an episode keeps its reward); None (unlabelled) for one that
        errored or has no reward. Says nothing about the judge."""
        if self.error:
            return None
        if self.verifiable_reward is None:
            return 0.0 if self.truncated else None
        return float(self.verifiable_reward)

    def content_hash(self) -> str:
        """Hash of what the judge sees (messages only), independent of ids and metrics."""
        return content_hash([m.to_openai() for m in self.messages])

    def text(self) -> str:
        """All message text and tool-call arguments, for full-text search."""
        parts: list[str] = []
        for m in self.messages:
            if m.content:
                parts.append(m.content)
            for tc in m.tool_calls or []:
                parts.append(f"{tc.function.name} {tc.function.arguments}")
        return "\n".join(parts)


class TrajectoryScore(_Model):
    trajectory_id: str
    score: float = Field(ge=0.0, le=1.0)
    rationale: str = ""
    hack_suspected: bool = False


class PresentationRecord(TypedDict):
    """One presentation of a group to the judge as stored in ``Judgement.presentations``: what
    ``rankgym.judges.record.Presentation.to_dict`` writes (see that class for each field).
    Keys marked NotRequired are left out when unset, or missing from older records."""

    order: list[str]
    scores: dict[str, float]
    rationales: dict[str, str]
    hack_suspected: dict[str, bool]
    raw_response: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    calls: int
    errors: list[str]
    latency_s: float
    service_s: NotRequired[float]
    queue_s: NotRequired[float]
    subsets: NotRequired[list[dict[str, Any]]]
    cached: bool
    error: NotRequired[str]
    copies: NotRequired[dict[str, str]]
    scale: NotRequired[float]


if TYPE_CHECKING:
    _Presentations = list[PresentationRecord]
else:  # pydantic keeps validating (and storing) them as plain dicts, byte for byte as before
    _Presentations = list[dict[str, Any]]


class Judgement(_Model):
    """The judge's verdict on one group under one spec (possibly averaged over presentations).

    ``status`` is ``"ok"`` or ``"unjudged"``; an unjudged group keeps its ``error`` and has no
    scores. ``presentations`` holds each shuffled presentation's own scores and order when
    ``--permutations K`` > 1.
    """

    schema_version: int = SCHEMA_VERSION
    id: str = Field(default_factory=lambda: new_id("judg"))
    group_id: str
    spec_hash: str
    status: Literal["ok", "unjudged"] = "ok"
    scores: list[TrajectoryScore] = Field(default_factory=list)
    presentations: _Presentations = Field(default_factory=list)
    error: str | None = None
    raw_response: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    calls: int = 0
    cached: bool = False

    def score_map(self) -> dict[str, float]:
        return {s.trajectory_id: s.score for s in self.scores}


class Group(_Model):
    """N trajectories of the same task, judged together in one comparison."""

    schema_version: int = SCHEMA_VERSION
    id: str = Field(default_factory=lambda: new_id("grp"))
    run_id: str = "default"
    step: int = 0
    env_id: str
    task_id: str
    trajectories: list[Trajectory]
    judgement: Judgement | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """The OpenAI tool schemas the env offered in this group's episodes (stored once per group,
    shown to the judge). Empty for groups written before tools were kept, or tool-less envs."""

    def content_hash(self) -> str:
        """Hash of the group as the judge sees it: task plus each trajectory's messages, by id.

        ``tools`` are left out (a group stored before tools were kept keeps its hash, labels and
        scores); the judge cache key adds them itself (``presentation_cache_key``)."""
        return content_hash(
            {
                "env": self.env_id,
                "task": self.task_id,
                "trajectories": {t.id: t.content_hash() for t in self.trajectories},
            }
        )


class JudgeSpec(_Model):
    """What produces a score: a LiteLLM model string, a comparison prompt, and parameters.

    Identified by ``spec_hash`` (content hash of all three), stored with every score.
    """

    schema_version: int = SCHEMA_VERSION
    model: str
    rubric: str
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = 2048
    context_window: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def spec_hash(self) -> str:
        try:
            data = self.model_dump(mode="json", exclude={"schema_version"})
        except (UnicodeEncodeError, PydanticSerializationError):  # a lone surrogate in `extra`
            data = self.model_dump(exclude={"schema_version"})
        # a trained local judge (local/NAME@DIR, or the shipped adapter a bare local/smollm2
        # serves) adds its adapter's content hash (rankgym.judge_backend)
        data.update(parse_model(self.model).spec_hash_fields())
        return content_hash(data)
