"""A Runtime's life beside its host: the time a request waits for a slot is its `queued_s`,
closing is idempotent and safe from an `atexit` handler."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ragraph
from tests.runtime.fakes import random_search

ROOT = Path(__file__).resolve().parents[2]
SIM = dict(engine="sim", search_threads=1, nprobe=16)
QUESTIONS = [f"What is notable about topic number {i}?" for i in range(3)]


def test_a_request_waiting_for_a_slot_counts_the_wait_as_queued():
    """One slot: each request starts when the one before it has finished, and waited that long."""
    with ragraph.Runtime(search=random_search(), concurrency=1, **SIM) as rt:
        answers = rt.batch(ragraph.load(ROOT / "workflows" / "oneshot.rag"), QUESTIONS)
    outcomes = [a.outcome for a in answers]
    for before, after, answer in zip(outcomes, outcomes[1:], answers[1:], strict=False):
        assert after.started_at >= before.finished_at
        assert answer.timings.queued_s >= before.finished_at - after.admitted_at > 0
        assert answer.timings.queued_s <= answer.timings.total_s
    assert answers[0].timings.queued_s < answers[1].timings.queued_s < answers[2].timings.queued_s


def test_close_twice_is_quiet():
    rt = ragraph.Runtime(search=random_search(), **SIM).open()
    rt.close()
    rt.close()


def test_close_registered_with_atexit_closes_the_runtime_at_exit():
    script = textwrap.dedent(f"""
        import atexit, sys
        sys.path.insert(0, {str(ROOT)!r})
        import ragraph
        from tests.runtime.fakes import random_search

        rt = ragraph.Runtime(search=random_search(), **{SIM!r}).open()
        atexit.register(rt.close)
        print(rt.run(ragraph.load("oneshot"), "Who wrote Middlemarch?").answer is not None)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]
    assert "Traceback" not in out.stderr and "Error" not in out.stderr, out.stderr


@pytest.mark.slow  # the embedded Gemma model
def test_a_llamacpp_runtime_closes_from_atexit():
    """Closing the embedded engine waits for its decode thread without an executor, which the
    interpreter has stopped by the time `atexit` handlers run."""
    script = textwrap.dedent(f"""
        import atexit, sys
        sys.path.insert(0, {str(ROOT)!r})
        import ragraph
        from tests.runtime.fakes import random_search

        rt = ragraph.Runtime(search=random_search(), engine="llamacpp", concurrency=1,
                             search_threads=1, nprobe=16).open()
        atexit.register(rt.close)
        print("open")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.split() == ["open"], out.stderr
    assert "Traceback" not in out.stderr, out.stderr
