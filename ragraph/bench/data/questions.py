"""Benchmark questions: NQ-open for single-hop workflows, HotpotQA and MuSiQue for multi-hop ones.

Questions cycle when a workload needs more than a dataset holds; ids stay unique. Without the data
folder a fixed list of questions stands in (noted), so the bench still runs on a user's machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragraph.bench.data.traffic import UNIFORM, Traffic
from ragraph.runtime.request import Request

# Workflows that decompose or fan out a question read multi-hop questions.
MULTI_HOP = frozenset({"multistep", "irg", "ircot", "ragfusion", "subquestions"})
NQ_FILE = "nq-open-dev.jsonl"
MULTI_HOP_FILES = ("hotpotqa_train.json", "musique_train.json")
FALLBACK = (
    ("who designed the eiffel tower", ("Gustave Eiffel",)),
    ("when did the first man land on the moon", ("1969",)),
    ("what is the capital of australia", ("Canberra",)),
    ("who wrote the origin of species", ("Charles Darwin",)),
    ("which river flows through cairo", ("Nile",)),
    ("who painted the mona lisa", ("Leonardo da Vinci",)),
)


@dataclass(frozen=True)
class QuestionPool:
    single_hop: tuple[tuple[str, tuple[str, ...]], ...]
    multi_hop: tuple[tuple[str, tuple[str, ...]], ...]
    notes: tuple[str, ...]

    def for_workflow(self, workflow: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return self.multi_hop if workflow in MULTI_HOP else self.single_hop

    def requests(self, workflow: str, count: int, offset: int = 0,
                 traffic: Traffic = UNIFORM, seed: int = 0) -> list[Request]:
        """`count` requests for `workflow`: its question list in turn from `offset`, or drawn
        with `traffic`'s popularity (seeded by `seed`). Ids stay unique when questions repeat."""
        pool = self.for_workflow(workflow)
        out = []
        for i, pick in enumerate(traffic.picks(len(pool), count, offset, seed)):
            question, answers = pool[pick]
            out.append(Request(id=f"{workflow}-{offset + i}", question=question,
                               golden_answers=answers))
        return out


def load_questions(data: Path | None, limit: int = 2000) -> QuestionPool:
    from ragraph.eval import load_dataset

    notes: list[str] = []
    single = _load(data, (NQ_FILE,), limit, notes, load_dataset)
    multi = _load(data, MULTI_HOP_FILES, limit, notes, load_dataset)
    if not single:
        notes.append("single-hop questions: built-in fallback list")
    if not multi:
        notes.append("multi-hop questions: using the single-hop questions")
    single = single or list(FALLBACK)
    return QuestionPool(tuple(single), tuple(multi or single), tuple(notes))


def _load(data, names, limit, notes, load_dataset) -> list[tuple[str, tuple[str, ...]]]:
    per_file: list[list[tuple[str, tuple[str, ...]]]] = []
    for name in names:
        path = data / name if data is not None else None
        if path is None or not path.is_file():
            notes.append(f"{name}: not found under {data}; skipped")
            continue
        per_file.append([(ex.question, ex.golden_answers) for ex in load_dataset(path, limit)])
    # Round-robin over the files, so any prefix of the list mixes the datasets.
    longest = max((len(f) for f in per_file), default=0)
    return [f[i] for i in range(longest) for f in per_file if i < len(f)]
