"""Read-only aggregates the dashboard, the labeling queue and the agreement report need.

They live here so no SQL against the store's tables runs outside ``rankgym.store``; each
method returns plain rows (dicts) whose keys its docstring names. :class:`StoreQueries` is a
mixin of :class:`rankgym.store.Store`; use it through a ``Store``.

What this module does not do: it writes nothing, and it does not compute statistics or build
frames (``rankgym.judges.agreement`` and ``dashboard.data`` do).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rankgym.store.connection import StoreFile
from rankgym.store.filters import J_OK, group_filters

__all__ = ["StoreQueries"]

Rows = list[dict[str, Any]]
_PRESENTATION_SUM = (
    "(SELECT SUM(json_extract(p.value, '$.{key}')) FROM json_each(CASE WHEN"
    " json_valid(j.presentations) THEN j.presentations ELSE '[]' END) p"
    " WHERE NOT COALESCE(json_extract(p.value, '$.cached'), 0))"
)  # one number from the presentations' JSON of judgement j (a damaged one reads NULL)


def _run_clause(run_id: str | None, prefix: str = "AND") -> tuple[str, tuple[Any, ...]]:
    return (f"{prefix} g.run_id = ?", (run_id,)) if run_id else ("", ())


class StoreQueries(StoreFile):
    """Aggregate reads over runs, groups, judgements and labels (see module docstring)."""

    # ------------------------------------------------------------------ runs and groups
    def run_summaries(self) -> Rows:
        """Runs, newest first: ``id``, ``name``, ``kind``, ``created_at``, ``groups``, ``logged_steps``."""
        return self.query(
            "SELECT r.id, r.name, r.kind, r.created_at,"
            " (SELECT COUNT(*) FROM groups g WHERE g.run_id = r.id) AS groups,"
            " (SELECT COUNT(*) FROM steps s WHERE s.run_id = r.id) AS logged_steps"
            " FROM runs r ORDER BY r.created_at DESC"
        )

    def env_ids(self, run_id: str | None = None) -> list[str]:
        """The distinct env ids of the stored groups (of one run), sorted."""
        where, params = group_filters(run_id=run_id)
        rows = self.query(
            f"SELECT DISTINCT g.env_id FROM groups g {where} ORDER BY g.env_id", params
        )
        return [r["env_id"] for r in rows]

    def group_steps(self, run_id: str) -> list[int]:
        """The distinct steps at which a run stored groups, ascending."""
        where, params = group_filters(run_id=run_id)
        rows = self.query(f"SELECT DISTINCT g.step FROM groups g {where} ORDER BY g.step", params)
        return [r["step"] for r in rows]

    def count_trajectories(self) -> int:
        """How many trajectories the store holds."""
        return int(self.query("SELECT COUNT(*) AS n FROM trajectories")[0]["n"])

    def group_index(self, env_id: str | None = None) -> Rows:
        """Every group (of one env): ``id``, ``env_id``, ``task_id``."""
        where, params = group_filters(env_id=env_id)
        return self.query(f"SELECT g.id, g.env_id, g.task_id FROM groups g {where}", params)

    def group_content_hash(self, group_id: str) -> str | None:
        """The stored content hash of a group, or None when the group is not stored."""
        rows = self.query("SELECT content_hash FROM groups WHERE id = ?", (group_id,))
        return rows[0]["content_hash"] if rows else None

    # ------------------------------------------------------------------ judge specs
    def judge_spec_counts(self) -> Rows:
        """Specs, oldest first: ``hash``, ``model``, ``created_at``, ``groups`` (judged ok)."""
        return self.query(
            "SELECT js.hash, js.model, js.created_at,"
            " (SELECT COUNT(DISTINCT j.group_id) FROM judgements j"
            f"   WHERE j.spec_hash = js.hash AND {J_OK}) AS groups"
            " FROM judge_specs js ORDER BY js.created_at"
        )

    def spec_hashes_like(self, prefix: str) -> list[str]:
        """The stored spec hashes that start with ``prefix``."""
        rows = self.query("SELECT hash FROM judge_specs WHERE hash LIKE ?", (prefix + "%",))
        return [r["hash"] for r in rows]

    def most_judged_spec(self) -> str | None:
        """The spec hash with the most successful judgements (latest wins ties), or None."""
        rows = self.query(
            f"SELECT j.spec_hash, COUNT(*) AS n FROM judgements j WHERE {J_OK} "
            "GROUP BY j.spec_hash ORDER BY n DESC, MAX(j.created_at) DESC LIMIT 1"
        )
        return rows[0]["spec_hash"] if rows else None

    # ------------------------------------------------------------------ judgements
    def ok_judgement_ids(self, spec_hash: str) -> Rows:
        """Successful judgements under a spec, oldest first: ``id``, ``group_id``."""
        return self.query(
            f"SELECT j.id, j.group_id FROM judgements j WHERE j.spec_hash = ? AND {J_OK} "
            "ORDER BY j.created_at, j.rowid",
            (spec_hash,),
        )

    def judgement_scores(self, judgement_ids: Iterable[str]) -> Rows:
        """Scores of these judgements: ``judgement_id``, ``group_id``, ``trajectory_id``, ``score``."""
        ids = list(judgement_ids)
        out: Rows = []
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            out += self.query(
                "SELECT s.judgement_id, j.group_id, s.trajectory_id, s.score FROM scores s "
                "JOIN judgements j ON j.id = s.judgement_id "
                f"WHERE s.judgement_id IN ({','.join('?' * len(part))})",
                tuple(part),
            )
        return out

    def multi_presentation_judgements(self, spec_hash: str) -> Rows:
        """Successful judgements with 2+ presentations: ``id``, ``group_id``, ``presentations`` (JSON)."""
        return self.query(
            f"SELECT j.id, j.group_id, j.presentations FROM judgements j WHERE j.spec_hash = ? "
            f"AND {J_OK} AND json_valid(j.presentations) "
            "AND json_array_length(j.presentations) > 1",
            (spec_hash,),
        )

    def failed_judgement_group_ids(self, spec_hash: str) -> list[str]:
        """Ids of the groups with at least one unsuccessful judgement under a spec."""
        rows = self.query(
            f"SELECT DISTINCT j.group_id FROM judgements j WHERE j.spec_hash = ? AND NOT {J_OK}",
            (spec_hash,),
        )
        return [r["group_id"] for r in rows]

    def judged_verifiable_rewards(self, spec_hash: str) -> Rows:
        """Known rewards of trajectories in groups judged ok under a spec: ``id``, ``group_id``,
        ``verifiable_reward``."""
        return self.query(
            "SELECT t.id, t.group_id, t.verifiable_reward FROM trajectories t "
            "WHERE t.verifiable_reward IS NOT NULL AND t.group_id IN "
            f"(SELECT j.group_id FROM judgements j WHERE j.spec_hash = ? AND {J_OK})",
            (spec_hash,),
        )

    # ------------------------------------------------------------------ per-step curves
    def judgement_step_stats(self, run_id: str) -> Rows:
        """One row per judgement of a run: ``step``, ``spec_hash``, ``status``, ``cost_usd``,
        ``latency_s``, ``score`` (mean), ``spread`` (max - min), ``n`` (scores), and
        ``service_s`` / ``queue_s``: the judge's own time and its calls' wait, summed over the
        presentations not served from the cache (NULL for judgements older than the split)."""
        return self.query(
            "SELECT g.step, j.spec_hash, j.status, j.cost_usd, j.latency_s, AVG(s.score) AS score,"
            " MAX(s.score) - MIN(s.score) AS spread, COUNT(s.score) AS n,"
            f" {_PRESENTATION_SUM.format(key='service_s')} AS service_s,"
            f" {_PRESENTATION_SUM.format(key='queue_s')} AS queue_s"
            " FROM groups g JOIN judgements j ON j.group_id = g.id"
            " LEFT JOIN scores s ON s.judgement_id = j.id WHERE g.run_id = ? GROUP BY j.id",
            (run_id,),
        )

    def verifiable_step_stats(self, run_id: str) -> Rows:
        """Per step of a run: ``step``, ``verifiable_reward`` (mean of group means), ``groups``,
        ``zero_variance_groups``."""
        return self.query(
            "SELECT step, AVG(mean_r) AS verifiable_reward, COUNT(*) AS groups,"
            " SUM(CASE WHEN spread = 0 THEN 1 ELSE 0 END) AS zero_variance_groups"
            " FROM (SELECT g.step, AVG(t.verifiable_reward) AS mean_r,"
            "   MAX(t.verifiable_reward) - MIN(t.verifiable_reward) AS spread"
            "   FROM groups g JOIN trajectories t ON t.group_id = g.id"
            "   WHERE g.run_id = ? AND t.verifiable_reward IS NOT NULL GROUP BY g.id)"
            " GROUP BY step ORDER BY step",
            (run_id,),
        )

    # ------------------------------------------------------------------ hack suspects
    def judge_top_below_threshold(
        self, threshold: float, run_id: str | None = None, limit: int = 200
    ) -> Rows:
        """Trajectories at a judgement's exact maximum (above its minimum) with verifiable reward
        below ``threshold``, newest groups first: ``group_id``, ``trajectory_id``, ``spec_hash``,
        ``judge_score``, ``verifiable_reward``, ``run_id``, ``step``, ``env_id``, ``task_id``."""
        where, params = _run_clause(run_id)
        return self.query(
            "SELECT g.id AS group_id, s.trajectory_id, j.spec_hash, s.score AS judge_score,"
            " t.verifiable_reward, g.run_id, g.step, g.env_id, g.task_id"
            " FROM (SELECT judgement_id, MAX(score) AS mx, MIN(score) AS mn FROM scores"
            "   GROUP BY judgement_id) m"
            f" JOIN judgements j ON j.id = m.judgement_id AND {J_OK}"
            " JOIN scores s ON s.judgement_id = m.judgement_id AND s.score = m.mx"
            " JOIN trajectories t ON t.id = s.trajectory_id"
            " JOIN groups g ON g.id = j.group_id"
            " WHERE m.mx > m.mn AND t.verifiable_reward IS NOT NULL AND t.verifiable_reward < ?"
            f" {where} ORDER BY g.created_at DESC LIMIT ?",
            (threshold, *params, limit),
        )

    def judge_hack_suspects(self, run_id: str | None = None, limit: int = 500) -> Rows:
        """Scores the judge flagged ``hack_suspected``, newest groups first: ``trajectory_id``,
        ``group_id``, ``detail`` (the rationale), ``run_id``, ``step``, ``env_id``, ``task_id``."""
        where, params = _run_clause(run_id)
        return self.query(
            "SELECT s.trajectory_id, g.id AS group_id, s.rationale AS detail, g.run_id, g.step,"
            " g.env_id, g.task_id FROM scores s JOIN judgements j ON j.id = s.judgement_id"
            " JOIN groups g ON g.id = j.group_id WHERE s.hack_suspected = 1"
            f" {where} ORDER BY g.created_at DESC LIMIT ?",
            (*params, limit),
        )

    # ------------------------------------------------------------------ labeling queue
    def label_strata(self, **filters: Any) -> Rows:
        """Groups matching :func:`group_filters` ``filters`` per (run, env): ``run_id``,
        ``env_id``, ``n``; sorted by run and env."""
        where, params = group_filters(**filters)
        return self.query(
            f"SELECT g.run_id, g.env_id, COUNT(*) AS n FROM groups g {where}"
            " GROUP BY g.run_id, g.env_id ORDER BY g.run_id, g.env_id",
            params,
        )

    def group_ids_page(self, limit: int, offset: int, **filters: Any) -> list[str]:
        """Ids of the groups matching :func:`group_filters` ``filters``, in storage order,
        one page of ``limit`` from ``offset``."""
        where, params = group_filters(**filters)
        rows = self.query(
            f"SELECT g.id FROM groups g {where} ORDER BY g.rowid LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [r["id"] for r in rows]
