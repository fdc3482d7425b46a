"""Paths and ids a user gets wrong on the command line are one clean error (status 2, the flag
named), found before any model loads."""

from __future__ import annotations

from pathlib import Path

from ragraph.cli.main import main

ONESHOT = str(Path(__file__).resolve().parents[2] / "workflows" / "oneshot.rag")


def test_run_output_naming_a_folder_or_a_missing_folder(tmp_path: Path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text('{"question": "Who?"}\n')
    assert main(["run", ONESHOT, "--input", str(src), "-o", str(tmp_path), "--engine",
                 "sim"]) == 2
    assert f"--output: {tmp_path} is a folder" in capsys.readouterr().err
    missing = tmp_path / "nowhere" / "out.jsonl"
    assert main(["run", ONESHOT, "--input", str(src), "-o", str(missing), "--engine",
                 "sim"]) == 2
    assert f"--output: {missing.parent}: no such folder" in capsys.readouterr().err


def test_index_delete_an_id_past_64_bits(tmp_path: Path, capsys):
    assert main(["index", "delete", str(tmp_path), "--ids", "100000000000000000000000"]) == 2
    err = capsys.readouterr().err
    assert "ids: 100000000000000000000000 is not a passage id" in err
    assert "Traceback" not in err
