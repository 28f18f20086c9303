"""rankgym.integrations: rankgym's envs and group judge inside other trainers.

- ``rankgym.integrations.trl``: :class:`GroupJudgeReward` and :class:`EnvVerifierReward`
  (``trl.GRPOTrainer(reward_funcs=[...])``), :func:`trl_environment` (a rankgym env as a TRL
  ``environment_factory``), :func:`trl_dataset`, :func:`tool_chat_template`. Needs ``[trl]``.
- ``rankgym.integrations.art``: :func:`ruler_score_group`, a drop-in for
  ``art.rewards.ruler_score_group`` backed by the rankgym judge and store, and
  :func:`import_art`. Needs ``[art]``.
- ``rankgym.integrations.verifiers``: ``RankgymTaskset``, a rankgym env as a verifiers 0.4
  taskset scored by the env's verifier, and ``judge_traces``, the group judge over an
  evaluation's rollouts. Needs ``[verifiers]``.

Importing this package imports none of those engines; each module imports its engine itself
and raises a one-line ``UserError`` with the install command when it is missing.
Folder: ``integrations/``. Docs: docs/integrations.md.
"""

__all__: list[str] = []
