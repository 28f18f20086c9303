"""Mixed groups: several policies take turns inside each group (``--policy a,b,c``).

Part of ``rankgym.envs.policies``. Episode ``i`` of a group is played by policy
``i % len(policies)`` (round-robin, from ``EpisodeContext.index``), so a group of 4 with
``oracle,random`` holds two of each. Each policy's episodes are batched into one call of that
policy per driver step. Every ``Turn`` records the policy that wrote it (``Turn.policy``), and
so the trajectory's policy is its turns' policy.

Why: when every trajectory of a group comes from one policy, the verifier is often constant
inside the group and judge-vs-verifier agreement measures nothing. Mixed groups fix that.

What it does not do: mix policies *within* an episode, or weight policies other than by order
in the list (repeat a policy to give it more slots: ``embedded,embedded,oracle~0.5``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rankgym.envs.policies.base import BatchPolicy, Generation, Policy, Row, row_contexts


class MixedPolicy(BatchPolicy):
    """Round-robin over ``policies`` by the episode's slot in its group."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        if not policies:
            raise ValueError("a mixed policy needs at least one policy")
        self.policies = list(policies)
        self.name = ",".join(p.name for p in self.policies)

    def generate_rows(self, rows: list[Row]) -> list[Generation]:
        """One call of each policy with its rows; the generations back in row order."""
        n = len(self.policies)
        slots: dict[int, list[Row]] = {}
        for row in rows:
            k = (row.ctx.index if row.ctx is not None else row.index) % n
            slots.setdefault(k, []).append(row)
        out: list[Generation | None] = [None] * len(rows)
        for k, part in slots.items():
            gens = self.policies[k].generate(
                [r.messages for r in part], [r.tools for r in part], row_contexts(part)
            )
            for r, g in zip(part, gens, strict=True):
                out[r.index] = g
        return [g for g in out if g is not None]
