"""Mistakes in fan-out syntax (lists, maps, merges), each located at file:line:col."""

from __future__ import annotations

import pytest

from tests.dsl.test_errors import assert_located

HEAD = "input question\n"
LIST = 'generate rw -> queries[4]: "{question}"\n'
MAP = "retrieve s[q in queries] -> results:\n    query = q\n"
FUSE = "merge fuse -> docs (topk = 3): rrf(results)\n"
ANSWER = 'generate a -> answer: "{docs}"\n'
FLOW = "flow:\n    start -> rw -> s -> fuse -> a -> end\n"


def wf(*, lst=LIST, map_=MAP, fuse=FUSE, answer=ANSWER, flow=FLOW) -> str:
    return HEAD + lst + map_ + fuse + answer + flow


# (name, source, line, column, message fragment, hint fragment or None)
CASES = [
    ("unbounded list", wf(lst='generate rw -> queries[]: "{question}"\n'),
     2, 23, "a list output needs a bound on its item count", "queries[4]"),
    ("list bound zero", wf(lst='generate rw -> queries[0]: "{question}"\n'),
     2, 24, "a list holds 1..64 items, got 0", None),
    ("map over a scalar", wf(map_="retrieve s[q in question] -> results:\n    query = q\n"),
     3, 17, "cannot map over 'question': it is not a list", "-> queries[4]"),
    ("map over an undefined list", wf(map_="retrieve s[q in querys] -> results:\n"
                                           "    query = q\n"),
     3, 17, "undefined variable 'querys'", "did you mean 'queries'?"),
    ("item used outside its map", wf(answer='generate a -> answer: "{docs} {q}"\n'),
     6, 32, "'q' is the item of map 's' (line 3); it exists only inside that step", None),
    ("item in a condition", wf(flow=FLOW + '    a -> a if q == "x" loop max 2\n'),
     9, 15, "'q' is the item of map 's'", None),
    ("whole list in a prompt", wf(answer='generate a -> answer: "{docs} {queries}"\n'),
     6, 32, "'queries' is a list", "merge it first"),
    ("whole list in a condition", wf(flow=FLOW + "    a -> a if len(results) > 2 loop max 2\n"),
     9, 19, "'results' is a list", "[x in results]"),
    ("item shadows a variable", wf(map_="retrieve s[question in queries] -> results:\n"
                                        "    query = question\n"),
     3, 12, "item name 'question' shadows the variable 'question'", None),
    ("item bound twice", wf(map_="retrieve s[q in queries, q in queries] -> results:\n"
                                 "    query = q\n"),
     3, 26, "'q' is bound twice in this map", None),
    ("merge a scalar", wf(fuse="merge fuse -> docs: rrf(question)\n"),
     5, 25, "cannot merge 'question': it is not a list", None),
    ("unknown merge", wf(fuse="merge fuse -> docs: rff(results)\n"),
     5, 21, "unknown merge 'rff'", "did you mean 'rrf'?"),
    ("rrf constant on concat", wf(fuse="merge fuse -> docs (k = 10): concat(results)\n"),
     5, 25, "k is the constant of rrf; concat has none", None),
    ("unknown merge option", wf(fuse="merge fuse -> docs (kk = 10): rrf(results)\n"),
     5, 21, "unknown merge option 'kk'", "did you mean 'k'?"),
    ("rrf over text", wf(fuse="merge fuse -> docs: rrf(queries)\n"),
     5, 7, "rrf merges passages; 'queries' is a text list", "concat"),
    ("a map with a bound", wf(answer='generate a[q in queries] -> answer[2]: "{q}"\n'),
     6, 35, "a map writes one item per branch; its output takes no bound", None),
    ("appending to a list", wf(lst='generate rw -> queries[4] +=: "{question}"\n'),
     2, 16, "a list output cannot be appended to", None),
    ("zip of unrelated lists", HEAD + LIST + 'generate other -> more[2]: "{question}"\n'
     'generate a[q in queries, m in more] -> answers: "{q} {m}"\n'
     'merge j -> answer: concat(answers)\n',
     4, 10, "map 'a' zips lists that may differ in length", "same list output"),
    ("query with passages", wf(answer="retrieve t[d in results] -> more:\n    query = d\n"
                                      'generate a -> answer: "{docs}"\n',
                               flow=FLOW.replace("-> a ->", "-> t -> a ->")),
     6, 10, "retrieval 't' queries with 'd', which holds passages", None),
    ("missing in", wf(map_="retrieve s[q queries] -> results:\n    query = q\n"),
     3, 14, "unexpected 'queries', expected 'in'", None),
    ("merge keyword as id", wf(answer='generate merge -> answer: "{docs}"\n'),
     6, 10, "'merge' is a keyword", None),
]


@pytest.mark.parametrize(("name", "source", "line", "col", "message", "hint"), CASES,
                         ids=[c[0] for c in CASES])
def test_fanout_mistake_is_located(name, source, line, col, message, hint):
    assert_located(source, line, col, message, hint)
