"""Render groups and trajectories as chat transcripts, treating every string as untrusted.

Trajectory text comes from a policy, a tool or a third-party env, and judge rationales come
from a model: all of it is untrusted. This module shows it with ``st.text`` (no Markdown, no
HTML) or ``st.code`` (a code block); anything that has to pass through a Markdown-rendering
element (captions, labels, tab titles) goes through :func:`md_escape` first. Nothing here uses
``unsafe_allow_html``.

Anything that fails to render (a trajectory nested too deeply to print, say) is replaced by a
one-line error naming the trajectory; the other trajectories of the group are still shown.

What it does not do: it does not read the store (pages pass in ``Group`` objects) and it does
not sanitize for HTML, because it never emits HTML; it only stops Markdown from interpreting
punctuation.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Sequence
from typing import Any

import streamlit as st

from rankgym.types import Group, Judgement, Message, Trajectory

_PUNCT = set(string.punctuation)
_NO_AUTOLINK = re.compile(r"(?=://)|(?=@)|(?<=www)(?=\.)", re.IGNORECASE)
TOOL_RESULT_PREVIEW_CHARS = 4000
"""Tool results longer than this are shown truncated, with the full text in an expander."""


def md_escape(text: object, max_len: int | None = 200) -> str:
    """Backslash-escape every ASCII punctuation character so Markdown shows ``text`` literally.

    CommonMark allows a backslash before any ASCII punctuation, so links, images, emphasis,
    Streamlit's ``:color[...]`` / ``:material/...:`` directives and LaTeX ``$`` all come out as
    plain characters; newlines become spaces (labels are one line). ``max_len`` truncates.
    GitHub-flavoured Markdown also links bare ``http://...``, ``www.`` and ``a@b.c`` *after*
    escapes are resolved, so an invisible word joiner (U+2060) is put before ``://``, ``@`` and
    the dot of ``www.``: the text reads the same and is never a link.
    """
    s = " ".join(str(text).split())
    if max_len is not None and len(s) > max_len:
        s = s[: max_len - 1] + "…"
    s = _NO_AUTOLINK.sub("\u2060", s)
    return "".join("\\" + c if c in _PUNCT else c for c in s)


def letter(i: int) -> str:
    """Anonymous trajectory label: A, B, ..., Z, AA, AB, ..."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(65 + r) + out
    return out


def token_counts(t: Trajectory) -> dict[str, int]:
    """Assistant (completion) tokens, last prompt length, and turn count of a trajectory.

    Falls back to the trajectory's ``metrics`` (``tokens``/``completion_tokens``) when turns
    carry no token ids (e.g. API-model rollouts).
    """
    completion = sum(len(tu.completion_token_ids) for tu in t.turns)
    prompt = max((len(tu.prompt_token_ids) for tu in t.turns), default=0)
    if not completion:
        for key in ("completion_tokens", "tokens"):
            v = t.metrics.get(key)
            if isinstance(v, int | float):
                completion = int(v)
                break
    n_assistant = sum(1 for m in t.messages if m.role == "assistant")
    return {"completion_tokens": completion, "prompt_tokens": prompt, "turns": n_assistant}


def md_code(text: object, max_len: int | None = 500) -> str:
    """``text`` as a Markdown inline code span: shown literally, never a link or an image.

    Safer than :func:`md_escape` for free text such as exception messages: GitHub-flavoured
    Markdown turns a bare ``http://...`` into a link even with its punctuation escaped, but
    nothing inside a code span is interpreted. One line; ``max_len`` truncates.
    """
    s = " ".join(str(text).split())
    if max_len is not None and len(s) > max_len:
        s = s[: max_len - 1] + "…"
    runs = [len(r) for r in re.findall(r"`+", s)]
    fence = "`" * (max(runs, default=0) + 1)
    return f"{fence} {s} {fence}" if s else ""


def show_error(text: object, prefix: str = "") -> None:
    """An error box showing ``text`` literally (ids, paths and exception messages are data).

    ``prefix`` is trusted Markdown written by the page; ``text`` goes in a code span
    (:func:`md_code`), one line, 500 characters at most.
    """
    st.error(prefix + md_code(text))


CODE_TOOLS = frozenset({"run_python", "run_tests", "submit"})
"""Tools whose string arguments are Python source (the CodeTests env's tools)."""
CODE_ARGUMENTS = frozenset({"code", "source", "program", "script"})
"""Argument names whose string value is shown as Python, whatever the tool."""
LONG_ARGUMENT_CHARS = 80
"""String arguments longer than this (or with a newline) get a text block of their own."""


def _pretty_arguments(arguments: str) -> str:
    """Tool-call arguments indented for reading; the raw string when that fails (deep nesting)."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return arguments


def split_arguments(tool: str, arguments: str) -> list[tuple[str | None, str, str | None]]:
    """Tool-call arguments as blocks to show: ``(argument name or None, text, language)``.

    Code arguments (any string argument of :data:`CODE_TOOLS`, or one named in
    :data:`CODE_ARGUMENTS`) come out as their own ``"python"`` block, with real newlines
    instead of the escaped JSON string; other long or multi-line strings as text blocks
    (language ``None``); the remaining arguments together as one indented ``"json"`` block.
    Arguments that are not a JSON object come back as one JSON (or raw text) block.
    """
    try:
        parsed = json.loads(arguments)
    except (ValueError, TypeError, RecursionError):
        return [(None, arguments, None)]
    if not isinstance(parsed, dict):
        return [(None, _pretty_arguments(arguments), "json")]
    blocks: list[tuple[str | None, str, str | None]] = []
    rest: dict[str, object] = {}
    for key, value in parsed.items():
        is_code = isinstance(value, str) and (tool in CODE_TOOLS or key in CODE_ARGUMENTS)
        if is_code and value.strip():
            blocks.append((str(key), value, "python"))
        elif isinstance(value, str) and (len(value) > LONG_ARGUMENT_CHARS or "\n" in value):
            blocks.append((str(key), value, None))
        else:
            rest[key] = value
    if rest or not blocks:
        try:
            text = json.dumps(rest, indent=2, ensure_ascii=False)
        except (ValueError, TypeError, RecursionError):
            text = arguments
        blocks.insert(0, (None, text, "json"))
    return blocks


def render_message(m: Message, tool_names: dict[str, str]) -> None:
    """One message as a chat bubble; content via ``st.text``/``st.code`` only."""
    if m.role == "system":
        with st.expander("System prompt", expanded=False):
            st.text(m.content or "")
        return
    if m.role == "tool":
        name = m.name or tool_names.get(m.tool_call_id or "", "tool")
        with st.chat_message("tool", avatar=":material/build:"):
            st.caption(f"tool result · {md_escape(name, 60)}")
            body = m.content or ""
            if len(body) > TOOL_RESULT_PREVIEW_CHARS:
                st.code(body[:TOOL_RESULT_PREVIEW_CHARS] + "\n…", language=None, wrap_lines=True)
                with st.expander(f"full result ({len(body)} characters)"):
                    st.code(body, language=None, wrap_lines=True)
            else:
                st.code(body, language=None, wrap_lines=True)
        return
    with st.chat_message("user" if m.role == "user" else "assistant"):
        if m.content:
            st.text(m.content)
        for tc in m.tool_calls or []:
            st.caption(f"tool call · {md_escape(tc.function.name, 60)}")
            for key, text, lang in split_arguments(tc.function.name, tc.function.arguments):
                if key is not None:
                    st.caption(f"argument {md_escape(key, 60)}")
                st.code(text, language=lang, wrap_lines=lang != "python")
        if not m.content and not m.tool_calls:
            st.caption("(empty message)")


def render_transcript(t: Trajectory) -> None:
    """All messages of a trajectory, tool calls and tool results included."""
    tool_names = {
        tc.id: tc.function.name for m in t.messages for tc in (m.tool_calls or []) if tc.id
    }
    for m in t.messages:
        render_message(m, tool_names)
    if t.error:
        st.error("Episode error (shown as text below)")
        st.code(t.error, language=None, wrap_lines=True)


def _fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def render_trajectory(
    t: Trajectory,
    label: str,
    *,
    judgement: Judgement | None = None,
    hide_scores: bool = False,
    human_rank: float | None = None,
) -> None:
    """Header (label, id, tokens, rewards, judge score and rationale) and the transcript.

    With ``hide_scores`` (blind ranking) everything that could give a trajectory away is left
    out: the verifiable reward, judge score, rationale, hack signals, the trajectory id, and the
    token counts (scripted policies such as the oracle report 0 completion tokens) and the
    truncation flag; what is left is the transcript a labeler has to judge.
    """
    tc = token_counts(t)
    st.markdown(f"**{md_escape(label, 40)}**")
    if hide_scores:
        st.caption(f"{tc['turns']} assistant turns")
    else:
        st.caption(
            f"{md_escape(t.id, 60)} · {tc['turns']} assistant turns · "
            f"{tc['completion_tokens']} completion tokens · {tc['prompt_tokens']} prompt tokens"
            + (" · truncated" if t.truncated else "")
        )
        score = None
        rationale = ""
        hack = False
        if judgement is not None:
            for s in judgement.scores:
                if s.trajectory_id == t.id:
                    score, rationale, hack = s.score, s.rationale, s.hack_suspected
        c1, c2, c3 = st.columns(3)
        c1.metric("verifier", _fmt(t.verifiable_reward), help="verifiable reward from the env")
        c2.metric("judge", _fmt(score), help="judge score, 0..1")
        if human_rank is not None:
            c3.metric("your rank", f"{human_rank:g}")
        if rationale:
            st.text("Judge rationale: " + rationale)
        signals = list(t.hack_signals) + (["judge: hack_suspected"] if hack else [])
        if signals:
            st.warning("Hack signals: " + md_escape(", ".join(signals), 300))
    render_transcript(t)


def render_group(
    group: Group,
    *,
    tabbed: bool = False,
    hide_scores: bool = False,
    order: list[int] | None = None,
    labels: list[str] | None = None,
    tabs_key: str | None = None,
) -> None:
    """A group's trajectories side by side in columns, or in tabs when > 3 or ``tabbed``.

    ``order`` permutes the trajectories (blind ranking shuffles them); ``labels`` names them.
    ``tabs_key`` names the tabs widget: a new key per group makes each group open on its first
    tab (the browser otherwise keeps the tab chosen for the previous group). Columns stack
    vertically on narrow screens (Streamlit's own behaviour below ~640 px).
    """
    trajs = group.trajectories
    idx = order if order is not None else list(range(len(trajs)))
    names = labels or [f"Trajectory {letter(i)}" for i in range(len(idx))]
    if not idx:
        st.info("This group has no trajectories.")
        return
    containers: Sequence[Any]  # tab or column containers: both are `with` blocks
    if tabbed or len(idx) > 3:
        containers = st.tabs([md_escape(n, 40) for n in names], key=tabs_key)
    else:
        containers = st.columns(len(idx), border=True)
    for box, i, name in zip(containers, idx, names, strict=True):
        with box:
            try:
                render_trajectory(
                    trajs[i],
                    name,
                    judgement=None if hide_scores else group.judgement,
                    hide_scores=hide_scores,
                )
            except Exception as e:  # one unreadable trajectory must not hide the others
                show_error(
                    f"{type(e).__name__}; the data is unchanged in the store "
                    "(rankgym export shows it as JSON)",
                    prefix=f"{md_escape(name, 40)} cannot be shown: ",
                )
