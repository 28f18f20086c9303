"""What one judge-train run is: :class:`JudgeTrainJob` (where labels come from, how pairs are
built, how it trains) and :class:`JudgeRollout` (a policy's judge-split rollout first).

:func:`check_job` raises the :class:`UserError` a job with missing or bad inputs gets before
any work. ``rankgym judge-train`` builds a job from its flags, GRPO's ``[judge_train]`` stage
from its config section; ``judge_pipeline.run_judge_train`` trains it and
``judge_heldout.check_judge`` checks an existing judge on its pairs.

What it does not do: read a store or load a model (``check_job`` only looks at paths).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.errors import UserError

if TYPE_CHECKING:
    from rankgym.trainer.judge_train import JudgeTrainConfig

__all__ = ["BASE_DEFAULT", "ROLLOUT_STORE", "JudgeRollout", "JudgeTrainJob", "check_job"]

BASE_DEFAULT = "local/smollm2"
ROLLOUT_STORE = Path("data") / "rollout.db"
"""Where, under ``out``, the policy's judge-split rollout goes (``JudgeRollout``)."""


def _train_defaults() -> JudgeTrainConfig:
    from rankgym.trainer.judge_train import JudgeTrainConfig

    return JudgeTrainConfig()


@dataclass(frozen=True)
class JudgeRollout:
    """Roll a policy adapter out on each env's ``judge`` split into ``out/data/rollout.db``
    first, and train on those groups too (they are preferred under the pair caps)."""

    adapter: str
    envs: tuple[str, ...] = ("rankgym/ToolUse-v0",)
    tasks: int | None = None
    """Judge-split tasks per env (None: all)."""
    group_size: int = 4
    max_turns: int | None = None
    """Assistant turns per episode (None: the env's)."""


@dataclass
class JudgeTrainJob:
    """One judge-train run: where the labels come from, how pairs are built, how it trains."""

    out: Path
    stores: list[str] = field(default_factory=list)
    """Stores to take labelled trajectories from."""
    base: str = BASE_DEFAULT
    """``local/smollm2`` or a local transformers model directory."""
    heldout_fraction: float = 0.3
    min_heldout_tasks: int = 1
    """Tasks held out per env at least (while one is left to train on): the ``[judge_train]``
    stage asks for as many as its check needs (``judge_stage_check.MIN_CHECK_TASKS``)."""
    min_gap: float = 0.5
    """Smallest verifiable-reward difference that makes a pair."""
    max_per_task: int = 4
    max_train_pairs: int = 150
    max_heldout_pairs: int = 100
    length_balance: bool = True
    train: JudgeTrainConfig = field(default_factory=_train_defaults)
    """The training knobs; ``train.seed`` also seeds the split, the caps and the comparison."""
    compare_with: tuple[str, ...] = (BASE_DEFAULT,)
    """Judges compared with the trained one on the held-out pairs."""
    compare: bool = True
    fresh: bool = False
    """Ignore samples and checkpoints already in ``out``."""
    runs: list[str] | None = None
    """Only groups of these run ids (None: every run)."""
    prefer_stores: list[str] = field(default_factory=list)
    """Stores whose pairs are taken first under the caps (the rollout's always is)."""
    sources: tuple[str, ...] = ("verifier", "human")
    human_weight: float = 1.0
    rollout: JudgeRollout | None = None
    save_dtype: str = "float32"
    tie_ratio: float = 0.0
    """Tie pairs (equal verifier rewards or equal human ranks; target 0.5, see
    ``judge_data.tie_pairs``) per decided pair on each side, at most; 0 = none."""
    init_adapter: str | None = None
    """Continue training this judge adapter (its LoRA shape; ``lora_*`` knobs ignored)
    instead of a fresh LoRA."""
    answer_swaps: int = 0
    """Answer swaps per success on the training side (``judge_counterfactuals``): pairs that
    differ in the final reply only, labelled by replaying the env; 0 = none."""
    chain_edits: int = 0
    """Chain edits per success on the training side (``judge_chain_edits``): pairs whose loser
    leaves out the last call or makes one more the policy made elsewhere, and answers with what
    its chain returned, labelled by replaying the env; 0 = none."""
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """env id -> kwargs to build it with for the replay of answer swaps and chain edits
    (default: none)."""
    objective: str = "pairwise"
    """``pairwise``: a judge that compares two attempts, trained on labelled pairs;
    ``pointwise``: a judge that reads one attempt and answers yes/no, trained on every
    trajectory of the training-side tasks with a verifier outcome (``judge_points``); the
    held-out check is on pairs either way."""
    agreement: bool = False
    """Pointwise only: the prompt also states how many of the other attempts at the task gave
    the same final answer (``rankgym.judges.answers``); served, the count is over the group the
    judge is given, and the held-out check shows each pair among other attempts of its task."""
    min_check: tuple[int, int] | None = None
    """(pairs, tasks): stop before any training, with :class:`TooFewPairs`, when the held-out
    pairs are fewer than that or span fewer tasks, i.e. too few to decide a check (the
    ``[judge_train]`` stage sets it where a failed check means the judge goes unused)."""


OBJECTIVES = ("pairwise", "pointwise")
"""What a judge-train job trains (``JudgeTrainJob.objective``)."""


class TooFewPairs(UserError):
    """Too few labelled pairs to train a judge, or to decide its held-out check; the counts
    are kept so a caller can report them (the message names them too)."""

    def __init__(self, message: str, train: int, heldout: int, heldout_tasks: int) -> None:
        super().__init__(message)
        self.train, self.heldout, self.heldout_tasks = train, heldout, heldout_tasks


def require_checkable(job: JudgeTrainJob, held: str, train: int, heldout: int, tasks: int) -> None:
    """Raise :class:`TooFewPairs` when ``job.min_check`` is set and ``heldout`` pairs in
    ``tasks`` tasks are too few to decide a check; ``held`` says what holds them."""
    if job.min_check and (heldout < job.min_check[0] or tasks < job.min_check[1]):
        need = f"{job.min_check[0]} pairs in {job.min_check[1]} tasks"
        raise TooFewPairs(f"{held}; a held-out check needs {need} to decide anything", train, heldout, tasks)  # fmt: skip


def check_job(job: JudgeTrainJob) -> None:
    """The :class:`UserError` a job with missing inputs raises before any work."""
    if not job.stores and job.rollout is None:
        raise UserError(
            "pass at least one --store S (a store with verifiable rewards or rankings) or "
            "--rollout-adapter DIR"
        )
    for s in job.stores:
        if not Path(s).is_file():
            raise UserError(f"store {s!r} does not exist; create one with `rankgym rollout --store {s} ...`")  # fmt: skip
    if job.human_weight == 0 and tuple(job.sources) == ("human",):
        raise UserError("--human-weight 0 with --sources human leaves nothing to train on")
    if not (0.0 <= job.tie_ratio <= 100.0):  # False for nan
        raise UserError(f"--tie-ratio must be a number in [0, 100] (got {job.tie_ratio}); 0.5 = one tie pair per two decided pairs")  # fmt: skip
    from rankgym.trainer.judge_loss import TIE_LOSSES

    if job.train.tie_loss not in TIE_LOSSES:
        raise UserError(f"tie_loss must be {', '.join(TIE_LOSSES[:-1])} or {TIE_LOSSES[-1]} (got {job.train.tie_loss!r}); the served forms train ties on the order-averaged score")  # fmt: skip
    if job.init_adapter and not (Path(job.init_adapter) / "adapter_config.json").is_file():
        raise UserError(f"--init-adapter {job.init_adapter!r} is not a peft adapter directory (no adapter_config.json); pass OUT/adapter of an earlier judge-train")  # fmt: skip
    if job.objective not in OBJECTIVES:
        raise UserError(f"--objective must be {' or '.join(OBJECTIVES)} (got {job.objective!r})")
    if job.objective == "pointwise":
        if "verifier" not in job.sources:
            raise UserError("--objective pointwise learns from verifier rewards (a yes/no label per trajectory); people's rankings are relative: add verifier to --sources, or train a pairwise judge")  # fmt: skip
        if job.answer_swaps or job.chain_edits:
            raise UserError("--answer-swaps and --chain-edits make pairs; --objective pointwise trains on single trajectories: set them to 0")  # fmt: skip
    if job.agreement and job.objective != "pointwise":
        raise UserError("--agreement adds a line to a pointwise judge's prompt (how many other attempts gave the same final answer): add --objective pointwise")  # fmt: skip
    if job.base != BASE_DEFAULT and not Path(job.base).is_dir():
        raise UserError(f"--base {job.base!r}: use local/smollm2 or a local transformers model directory")  # fmt: skip
