"""`ragraph run` says which template renders a workflow's chat turns (the simulated engine's is a
stand-in), and says nothing for a workflow without any."""

from __future__ import annotations

from pathlib import Path

from ragraph.api.load import compile_catalog
from ragraph.cli.run_single import chat_note
from ragraph.dsl import load
from ragraph.runtime.llm.sim.engine import SimEngine

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def test_run_says_which_template_renders_chat_turns():
    chat = compile_catalog(load(WORKFLOWS / "oneshot_chat.rag"), "-O2")
    assert chat_note(chat, SimEngine()).startswith("chat turns: simulated stand-in")
    plain = compile_catalog(load(WORKFLOWS / "oneshot.rag"), "-O2")
    assert chat_note(plain, SimEngine()) == ""
