"""Mutated workflow files: `parse` raises only WorkflowError, always located, and anything it
accepts prints back to an equal graph. Deterministic (fixed seed) and fast (~ms per case)."""

from __future__ import annotations

import random
import re

import pytest

from ragraph.dsl import parse, to_rag
from ragraph.errors import WorkflowError
from tests.dsl.paths import WORKFLOWS

CASES = 2000
SEED = 20250611
# About half the mutants still parse (many edits land in prompts); printing every fifth keeps the
# test within seconds.
ROUND_TRIP_EVERY = 5
# Characters that matter to the grammar, inserted to reach the error paths around them.
SPECIAL = list('"{}()[]:#=,+-<>\\\'\n\t') + ['"""', "->", "loop", "max", "if", "flow:", "0",
                                                 " in ", "merge", "rrf(", "[4]", "[q in queries]"]
_TOKEN = re.compile(r'"""|->|\w+|\s+|[^\w\s]')


def _chars(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text))
    op = rng.choice(["delete", "duplicate", "swap", "insert"])
    if op == "delete":
        return text[:i] + text[i + 1:]
    if op == "duplicate":
        return text[:i] + text[i] + text[i:]
    if op == "swap" and i + 1 < len(text):
        return text[:i] + text[i + 1] + text[i] + text[i + 2:]
    return text[:i] + rng.choice(SPECIAL) + text[i:]


def _units(units: list[str], rng: random.Random) -> list[str]:
    i, j = rng.randrange(len(units)), rng.randrange(len(units))
    op = rng.choice(["delete", "duplicate", "swap"])
    out = list(units)
    if op == "delete":
        del out[i]
    elif op == "duplicate":
        out.insert(j, units[i])
    else:
        out[i], out[j] = out[j], out[i]
    return out


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        kind = rng.choice(["char", "line", "token"])
        if kind == "char" and text:
            text = _chars(text, rng)
        elif kind == "line":
            text = "\n".join(_units(text.split("\n"), rng))
        elif text:
            text = "".join(_units(_TOKEN.findall(text), rng))
    return text


# A pathological input (e.g. a backtracking grammar) would hang the parser: the timeout catches
# it, without a wall-clock assertion that a busy machine can break.
@pytest.mark.timeout(300)
def test_only_workflow_errors_escape():
    rng = random.Random(SEED)
    sources = [p.read_text(encoding="utf-8") for p in WORKFLOWS]
    outcomes = {"accepted": 0, "rejected": 0}
    for case in range(CASES):
        text = mutate(rng.choice(sources), rng)
        try:
            graph = parse(text, file="fuzz.rag")
        except WorkflowError as err:
            assert err.span is not None, f"case {case}: unlocated error {err}\n{text}"
            outcomes["rejected"] += 1
        except Exception as err:  # noqa: BLE001 - the point of the test: report the case
            pytest.fail(f"case {case}: {type(err).__name__}: {err}\n--- source ---\n{text}")
        else:
            outcomes["accepted"] += 1
            if outcomes["accepted"] % ROUND_TRIP_EVERY == 0:
                assert parse(to_rag(graph)) == graph, f"case {case}: printing changed\n{text}"
    assert outcomes["accepted"] > 50 and outcomes["rejected"] > 500, outcomes
