"""Hostile agent text: does the env's cost grow linearly with the length of what the agent wrote?

    python bench/agent_text.py [--sizes 10000 100000 1000000] [--repeat 3]

For each hostile family (the issue-16 cases) and size, times ``parse_text`` (the text tool-call
protocol parser), ``Env.step`` of ``rankgym/ToolUse-v0`` on the same text, and EmailSearch's
keyword extraction, against a peer measured in the same run on the same text: ``json.dumps``
(one C pass over the string, linear by construction). A linear implementation keeps the
ratio to the peer flat as the size grows 100-fold; a quadratic one multiplies it by ~100.
No assertion: it prints a table (best of ``--repeat`` runs).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import rankgym.envs  # noqa: E402
from rankgym.envs.email.inbox import _search_words  # noqa: E402
from rankgym.envs.toolcalls import parse_text  # noqa: E402


def families(n: int) -> dict[str, str]:
    """The issue-16 shapes of hostile text, each about ``n`` characters long."""
    call = '{"name": "calculate", "arguments": {"expression": "1"}} '
    return {
        "unary minus in a keyword call": "<tool_call>calculate(expression=" + "-" * n + "1)</tool_call>",
        "unclosed braces": "<tool_call>" + "{" * n,
        "nested lists": "<tool_call>" + "[" * (n // 2) + "]" * (n // 2) + "</tool_call>",
        "opening tags only": "<tool_call>" * (n // 11),
        "bare calls in prose": call * (n // len(call)),
        "distinct words": " ".join(f"w{i}" for i in range(n // 7)),
    }  # fmt: skip


def best(fn: Callable[[], object], repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    env = rankgym.envs.make("rankgym/ToolUse-v0")
    print(f"load {os.getloadavg()[0]:.1f}")
    print("| family | chars | json.dumps (peer) | parse_text | x peer | ToolUse step | x peer | keywords | x peer |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name in families(10):
        for n in args.sizes:
            print(row(env, name, families(n)[name], args.repeat))


def row(env: rankgym.envs.Env, name: str, text: str, repeat: int) -> str:
    """One table row: the peer, the parser, a whole ToolUse step, the keyword extraction."""
    peer = best(lambda: json.dumps(text), repeat)
    parse = best(lambda: parse_text(text), repeat)

    def step() -> None:
        env.reset(seed=0)
        env.step(text)

    stepped = best(step, repeat)
    words = best(lambda: _search_words(text), repeat)
    return (
        f"| {name} | {len(text):,} | {peer * 1e3:.2f} ms | {parse * 1e3:.1f} ms | "
        f"{parse / peer:.0f} | {stepped * 1e3:.1f} ms | {stepped / peer:.0f} | "
        f"{words * 1e3:.2f} ms | {words / peer:.1f} |"
    )


if __name__ == "__main__":
    main()
