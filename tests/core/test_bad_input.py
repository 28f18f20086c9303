"""Issue 16, core part: bad input gives one line and exit 2, never a traceback or lost data.

Each case the issue lists for the store and the CLI is pinned here as a fixed example: store
paths that are a directory, not SQLite, cut off, read-only or of a future schema (in every
command that opens a store); `export --out DIR`; a non-UTF-8 `train --config`; `--json` into
a closed pipe; control characters in errors; lone surrogates and invalid UTF-8 in stored text.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_store import make_group

from rankgym.cli import main
from rankgym.config import ConfigError, load_config
from rankgym.errors import RankgymError, StoreError, UserError
from rankgym.store import MIGRATIONS, Store
from rankgym.types import Message

RANKGYM = [sys.executable, "-m", "rankgym.cli"]


def _good_store(path: Path, groups: int = 12) -> Path:
    with Store(path) as s:
        for i in range(groups):
            s.put_group(make_group(step=i, text="x" * 2000))
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _bad_stores(root: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, words the error must contain)."""
    good = _good_store(root / "good.db")
    data = good.read_bytes()
    (root / "dir.db").mkdir()
    (root / "junk.db").write_bytes(b"name,score\nT1,0.5\n" * 50)
    (root / "cut.db").write_bytes(data[: len(data) // 2])
    (root / "header.db").write_bytes(data[:60])
    future = root / "future.db"
    shutil.copy(good, future)
    with sqlite3.connect(future) as c:
        c.execute("PRAGMA user_version = 99")
    return {
        "directory": (root / "dir.db", "is a directory"),
        "not sqlite": (root / "junk.db", "not an SQLite database file"),
        "truncated": (root / "cut.db", "damaged"),
        "header only": (root / "header.db", "damaged"),
        "future schema": (future, "newer than this rankgym"),
        "under a file": (root / "junk.db" / "s.db", "is a file, not a folder"),
    }


def _commands(store: Path, tmp: Path) -> dict[str, list[str]]:
    return {
        "rollout": [
            "rollout",
            "--env",
            "rankgym/ToolUse-v0",
            "--policy",
            "oracle",
            "--tasks",
            "1",
            "--store",
            str(store),
            "--quiet",
        ],  # fmt: skip
        "judge": ["judge", "--store", str(store), "--quiet"],
        "dashboard": ["dashboard", "--store", str(store), "--quiet"],
        "export": ["export", "--store", str(store), "--out", str(tmp / "out.jsonl")],
    }


def test_every_unusable_store_is_one_line_and_exit_2_in_every_command(tmp_path, capsys):
    for name, (path, words) in _bad_stores(tmp_path).items():
        for command, argv in _commands(path, tmp_path).items():
            assert main(argv) == 2, (name, command)
            err = capsys.readouterr().err.strip()
            assert err.startswith(f"rankgym {command}: error: "), (name, command, err)
            assert "\n" not in err and "Traceback" not in err
            if name == "under a file" and command != "rollout":
                assert "does not exist" in err  # commands that only read never create it
            elif command in ("rollout", "export") or name != "directory":
                assert words in err, (name, command, err)
        with pytest.raises(StoreError):
            Store(path)
    assert not (tmp_path / "junk.db").is_dir()  # nothing was created on the way


def test_a_damaged_store_raises_store_errors_not_sqlite_errors(tmp_path):
    path = _good_store(tmp_path / "s.db", groups=40)
    data = bytearray(path.read_bytes())
    for off in range(len(data) // 3, len(data) // 3 + 4096 * 20, 4096):
        data[off + 50 : off + 3000] = b"\xff" * 2950
    path.write_bytes(bytes(data))
    s = Store(path)  # the first pages are fine: found only when a query reads the rest
    failures = 0
    for gid in s.group_ids():
        try:
            s.get_group(gid)
        except StoreError as e:
            assert "is damaged" in str(e) or "has a row that cannot be read" in str(e)
            failures += 1
    assert 0 < failures < 40
    for fmt in ("jsonl", "parquet"):  # the export goes on past the damaged groups
        result = s.export(tmp_path / f"out.{fmt}", fmt)
        assert result.skipped and result.records > 0


DAC_CAPS = "-dac_override,-dac_read_search,-fowner"
"""The capabilities that let root ignore file modes; without them root meets 0444 like anyone."""


def _as_file_modes_apply() -> tuple[list[str], str | None]:
    """(command prefix, None) under which file modes bind the child, or ([], why not).

    A non-root user needs nothing. Root drops the capabilities that bypass file modes
    (``setpriv --bounding-set``) and stays root otherwise, so it can still read the venv and
    the clone wherever they live: running as another user (uid 65534) would need the clone's
    every parent directory to be searchable by that user, and ``mktemp -d`` makes it 0700.
    """
    if os.geteuid() != 0:
        return [], None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return [], "root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE for the child"
    prefix = [setpriv, f"--bounding-set={DAC_CAPS}", "--inh-caps=-all"]
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "import rankgym.cli"], capture_output=True, text=True
    )
    if probe.returncode != 0:  # e.g. a container without CAP_SETPCAP
        return [], f"setpriv cannot drop the file-mode capabilities here: {probe.stderr[-200:]}"
    return prefix, None


def test_a_read_only_store_can_be_read_and_refuses_writes_clearly(tmp_path: Path):
    prefix, why_not = _as_file_modes_apply()
    if why_not:
        pytest.skip(why_not)
    folder = tmp_path / "ro"
    folder.mkdir()
    store = _good_store(folder / "s.db", groups=3)
    old = folder / "old.db"
    with sqlite3.connect(old) as c:
        for script in MIGRATIONS[:3]:
            c.executescript(script)
        c.execute("PRAGMA user_version = 3")
    old.chmod(0o444)
    store.chmod(0o444)
    for extra in folder.glob("s.db-*"):
        extra.unlink()
    folder.chmod(0o555)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "HOME": str(out)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [*prefix, *RANKGYM, *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out)

    try:
        read = run("export", "--store", str(store), "--out", str(out / "e.jsonl"), "--json")
        assert read.returncode == 0, read.stderr
        assert json.loads(read.stdout)["records"] == 3
        write = run("rollout", "--env", "rankgym/ToolUse-v0", "--policy", "oracle",
                    "--tasks", "1", "--store", str(store))  # fmt: skip
        assert write.returncode == 2 and "Traceback" not in write.stderr
        assert "is read-only" in write.stderr
        stale = run("export", "--store", str(old), "--out", str(out / "o.jsonl"))
        assert stale.returncode == 2 and "is not writable here" in stale.stderr
    finally:
        folder.chmod(0o755)  # so pytest can remove tmp_path


def test_export_to_a_directory_or_under_a_file_is_a_clear_error(tmp_path, capsys):
    store = _good_store(tmp_path / "s.db", groups=1)
    assert main(["export", "--store", str(store), "--out", str(tmp_path)]) == 2
    assert "is a directory; give a file name" in capsys.readouterr().err
    assert main(["export", "--store", str(store), "--out", str(store / "x.jsonl")]) == 2
    assert "cannot write export" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.tmp"))


def test_a_train_config_that_is_not_utf8_is_a_clear_error(tmp_path, capsys):
    cfg = tmp_path / "train.toml"
    cfg.write_bytes(b'env = "rankgym/ToolUse-v0"\nname = "caf\xe9"\n')
    assert main(["train", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "not UTF-8 text (byte 0xe9 on line 2)" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path, dict)  # type: ignore[arg-type]


def test_json_into_a_closed_pipe_exits_quietly(tmp_path):
    store = _good_store(tmp_path / "s.db", groups=2)
    cmd = [*RANKGYM, "export", "--store", str(store), "--out", str(tmp_path / "o.jsonl"), "--json"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # like `| head` that has already exited
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert p.returncode == 141


def test_control_characters_in_an_error_are_escaped(store_path, capsys):
    assert (
        main(["rollout", "--env", "\x1b[2J\x1b]0;pwned\x07Evil-v0", "--store", str(store_path)])
        == 2
    )
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b[2J" in err
    assert err.count("\n") == 1


def test_every_rankgym_error_shares_one_base():
    from rankgym.envs.registry import UnknownEnvError
    from rankgym.judges import JudgeFailed
    from rankgym.model import EmbeddedModelMissing

    for cls, old in ((StoreError, RuntimeError), (JudgeFailed, RuntimeError),
                     (UnknownEnvError, ValueError), (EmbeddedModelMissing, RuntimeError),
                     (ConfigError, UserError)):  # fmt: skip
        assert issubclass(cls, RankgymError) and issubclass(cls, old), cls


def test_a_lone_surrogate_anywhere_in_a_group_is_stored_and_read_back(store_path):
    g = make_group(text="bad \ud800 text")
    t = g.trajectories[0]
    t.messages.append(Message(role="assistant", content="\udfff\x00end", name="n\ud83d"))
    t.error = "tool said \ud800"
    t.metrics["x\ud800"] = 1
    s = Store(store_path)
    s.put_group(g)
    back = s.get_group(g.id).trajectories[0]
    assert back.messages == t.messages  # JSON columns keep the text exactly
    assert back.metrics == t.metrics
    assert back.error == "tool said \ufffd"  # a plain column holds valid UTF-8 only
    assert s.list_groups(search="\ud800 text")[0]["id"] == g.id
    assert s.export(store_path.with_suffix(".jsonl")).records == 1


def test_invalid_utf8_in_a_row_is_read_with_replacement_and_counted(store_path, tmp_path):
    g = make_group()
    s = Store(store_path)
    s.put_group(g)
    bad = '[{"role":"user","content":"caf\xff!"}]'.encode("latin-1")
    s.conn.execute(
        "UPDATE trajectories SET messages = CAST(? AS TEXT) WHERE id = ?",
        (bad, g.trajectories[1].id),
    )
    back = s.get_group(g.id)
    assert back.trajectories[1].messages[0].content == "caf\ufffd!"
    assert s.repaired_texts == 1
    result = s.export(tmp_path / "o.jsonl")
    assert (result.records, result.repaired_texts, result.skipped) == (1, 1, [])
    parquet = s.export(tmp_path / "o.parquet", "parquet")
    assert parquet.records == 3 and parquet.repaired_texts == 1


def test_a_row_that_is_not_json_is_skipped_by_export_and_named(store_path, tmp_path, capsys):
    groups = [make_group(step=i) for i in range(3)]
    s = Store(store_path)
    s.put_groups(groups)
    s.conn.execute(
        "UPDATE trajectories SET messages = '[{' WHERE id = ?", (groups[1].trajectories[0].id,)
    )
    s.close()
    out = tmp_path / "o.jsonl"
    assert main(["export", "--store", str(store_path), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 2 and summary["skipped_groups"] == 1
    assert summary["skipped"][0]["group_id"] == groups[1].id
    assert len(out.read_text().splitlines()) == 2


def test_damaged_json_in_other_rows_is_a_store_error_or_a_cache_miss(store_path):
    s = Store(store_path)
    run = s.create_run(run_id="r", config={"a": 1})
    s.log_step(run, 0, {"loss": 1.0})
    s.cache_put("spec", "group", {"scores": []})
    s.conn.execute("UPDATE runs SET config = '{not json'")
    s.conn.execute("UPDATE steps SET metrics = '['")
    s.conn.execute("UPDATE judge_cache SET value = 'nan nan'")
    with pytest.raises(StoreError, match="run 'r': config holds damaged JSON"):
        s.runs()
    with pytest.raises(StoreError, match="step 0 of run 'r': metrics holds damaged JSON"):
        s.steps("r")
    assert s.cache_get("spec", "group") is None


def test_printable_escapes_what_can_drive_a_terminal_and_keeps_the_rest():
    from rankgym.terminal import printable

    assert printable("a\x1b[31mb\x07\x9b\u202e\ud800") == "a\\x1b[31mb\\x07\\x9b\\u202e\\ud800"
    assert printable("line1\nline2\tx") == "line1\nline2\tx"
    assert printable("line1\nline2\tx", one_line=True) == "line1\\nline2\\tx"
    assert printable("héllo 世界 🙂 — ok") == "héllo 世界 🙂 — ok"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_printable_output_never_holds_a_control_character(text):
    import unicodedata

    from rankgym.terminal import printable

    out = printable(text, one_line=True)
    assert not any(unicodedata.category(c) in ("Cc", "Cs") for c in out)
    assert "\u202e" not in out and "\u2066" not in out
