"""``rankgym/ToolUse-v0``: small verifiable tasks solved with five families of tools.

Families and their tools (an episode only sees its task's tools):

- ``calc``: ``calculate(expression)`` (safe arithmetic, no names, no calls);
- ``units``: ``convert_units(value, from_unit, to_unit)`` (length, mass, volume, time,
  temperature);
- ``dates``: ``add_days(date, days)``, ``days_between(start, end)``, ``day_of_week(date)``;
- ``lookup``: ``lookup(table, key, column)``, ``list_columns(table)`` over two synthetic tables
  (``products``, ``employees``) whose values the model cannot know without looking them up;
- ``strings``: ``reverse_text(text)``, ``count_letters(text, letter=None)``, ``word_count(text)``.

Tasks: 580 generated deterministically (a fixed seed and only ``random.random()``, whose output
Python guarantees across versions), three difficulty levels per family, 20% held out as the
``test`` split (every fifth task of each family/difficulty; prompts are unique across splits).
``easy`` tasks are one-step ("What is 7 + 9?"); ``medium`` need one tool call with real work
(a conversion, 2-digit multiplication, a date across months); ``hard`` chain two or three steps.
``ToolUseEnv(difficulty="easy", families=["calc"])`` restricts the pool.

Answer checking: the answer is read from the *final assistant message* (the reply without a tool
call), inside ``<answer>...</answer>`` if present, else from the whole message. A number answer
is the **last number** in it (tolerance 0.01, so "7 + 9 = 16" is right); a date answer the last
``YYYY-MM-DD``; a text answer must be the last word(s) or the last quoted string.

Reward (``info["verifiable_reward"]``): 1.0 for a correct answer; otherwise 0.2 if the agent
made at least one well-formed call (a registered tool of this task, valid arguments, ran without
error), else 0.0. ``success_threshold`` is 1.0, so the 0.2 is format credit, never success.
``ToolUseEnv(chain_credit=c)`` (default 0.0; ``0 <= c < 0.8``) adds to a wrong answer's format
credit ``c`` times the share of the oracle's calls the episode reproduced (the same tool returning
the same value, in any order: ``env.chain_progress``), so a chain that made its second call and
then answered wrong outranks one that stopped after the first. Still never success, and never
paid to an episode cut at its turn limit before it answered (that taught calling without end).
Hack signals: ``correct_without_lookup`` (a lookup task answered right without a successful
lookup: a guess or a leak), ``answer_spam`` (the final message lists many candidate answers;
such a reply is also wrong: see ``answers.is_spam``).

What it does not do: no natural-language number parsing ("sixteen" is wrong), no unit
conversion beyond the listed units, no tool timeouts (the tools are all O(input)).
"""

from rankgym.envs.tooluse.answers import check_answer, format_answer, is_spam, numbers_in
from rankgym.envs.tooluse.env import FORMAT_CREDIT, ToolUseEnv
from rankgym.envs.tooluse.tasks import DIFFICULTIES, SEED, ToolUseTask, generate_tasks
from rankgym.envs.tooluse.tools import (
    TOOL_FAMILIES,
    add_days,
    calculate,
    convert_units,
    count_letters,
    day_of_week,
    days_between,
    list_columns,
    lookup,
    reverse_text,
    word_count,
)

__all__ = [
    "DIFFICULTIES",
    "FORMAT_CREDIT",
    "SEED",
    "TOOL_FAMILIES",
    "ToolUseEnv",
    "ToolUseTask",
    "add_days",
    "calculate",
    "check_answer",
    "convert_units",
    "count_letters",
    "day_of_week",
    "days_between",
    "format_answer",
    "generate_tasks",
    "is_spam",
    "list_columns",
    "lookup",
    "numbers_in",
    "reverse_text",
    "word_count",
]
