"""The exactness check: points of one quality setting (differing only in speed knobs) must give
each question the same answer; a mismatch is found and reported loudly."""

from __future__ import annotations

from ragraph.tune.front import exactness
from ragraph.tune.report import exactness_lines
from ragraph.tune.space import Point

from .surface import every_point, surface


def test_equal_answers_pass():
    compared, mismatches = exactness(every_point())
    assert compared == 72 and mismatches == []
    assert exactness_lines(compared, mismatches)[0].startswith("exactness: OK")


def test_an_answer_changed_by_concurrency_is_flagged():
    base = Point(8, 5, 2, "-O2", 4)
    fast = Point(8, 5, 2, "-O2", 16)
    a = surface(base, {"q1": "Paris", "q2": "1969"})
    b = surface(fast, {"q1": "Paris", "q2": "1970"})
    other = surface(Point(16, 5, 2, "-O2", 4), {"q1": "Lyon", "q2": "1969"})
    compared, mismatches = exactness([a, b, other])
    assert compared == 1
    assert [(m.question, m.a.point, m.b.point) for m in mismatches] == [("q2", base, fast)]
    lines = exactness_lines(compared, mismatches)
    assert lines[0].startswith("EXACTNESS VIOLATED: 1 answers differ")
    assert "question q2" in lines[1] and "'1969'" in lines[1] and "'1970'" in lines[1]


def test_nothing_to_compare_says_so():
    compared, mismatches = exactness([surface(Point(8, 5, 2, "-O2", 4))])
    assert compared == 0 and "not checked" in exactness_lines(compared, mismatches)[0]


def test_an_engine_that_does_not_promise_it_lists_the_changes_without_a_violation():
    base, fast = Point(8, 5, 2, "-O2", 4), Point(8, 5, 2, "-O2", 16)
    compared, mismatches = exactness([surface(base, {"q1": "Paris"}),
                                      surface(fast, {"q1": "Lyon"})])
    lines = exactness_lines(compared, mismatches, promised=False)
    assert "VIOLATED" not in lines[0] and lines[0].startswith("exactness: not promised")
    assert "1 answers differ" in lines[0] and "--exact" in lines[0]
    assert "question q1" in lines[1]


def test_which_settings_promise_answers_independent_of_batching():
    from ragraph.runtime.llm.settings import LlmConfig
    from ragraph.runtime.llm.sim.engine import SimEngine

    assert LlmConfig(engine="sim").batch_invariant and SimEngine.batch_invariant
    assert LlmConfig(engine="llamacpp", exact=True).batch_invariant
    assert not LlmConfig(engine="llamacpp").batch_invariant
    assert not LlmConfig(engine="openai", url="http://127.0.0.1:1").batch_invariant


def test_an_answer_changed_by_the_release_or_the_budget_is_flagged():
    # The simulated engine promises answers whatever its budget or the release: a point whose
    # budget or release alone moved an answer is a violation like one of concurrency's.
    base = Point(8, 5, 2, "-O2", 4, release="step", budget=8192)
    for moved in (Point(8, 5, 2, "-O2", 4, release="step", budget=2048),
                  Point(8, 5, 2, "-O2", 4, release="retrieval", budget=8192)):
        compared, mismatches = exactness([surface(base, {"q1": "Paris"}),
                                          surface(moved, {"q1": "Lyon"})])
        assert compared == 1 and [(m.a.point, m.b.point) for m in mismatches] == [(base, moved)]
        lines = exactness_lines(compared, mismatches)
        assert lines[0].startswith("EXACTNESS VIOLATED") and "release" in lines[0]
        assert "budget" in lines[0] and moved.key in lines[1]
