"""A seeded generator of random valid builder graphs: chains of generations and retrievals with
conditional diamonds, bounded loops, reused variables (WAR/WAW hazards), appends and fan-outs (a
list output, a map over it, a merge)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ragraph import END, START, RAGraph

# Keeps each graph small enough that compiling (verify after every pass) stays well under 0.1 s.
MAX_NODES = 10


@dataclass
class _Scope:
    text: set[str]
    passages: set[str]


class RandomGraph:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.g = RAGraph(f"random{seed}")
        self.g.add_input("question")
        self.count = 0
        self.all_text: set[str] = {"question"}
        self.all_passages: set[str] = set()

    def build(self) -> RAGraph:
        first, last, _ = self.seq(0, _Scope({"question"}, set()))
        self.g.add_edge(START, first)
        self.g.add_edge(last, END)
        return self.g

    def _id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def node(self, scope: _Scope) -> str:
        rng = self.rng
        if rng.random() < 0.35:
            nid = self._id("r")
            query = "{" + "} {".join(rng.sample(sorted(scope.text), min(2, len(scope.text)))) + "}"
            out = rng.choice(sorted(scope.passages)) if scope.passages and rng.random() < 0.3 \
                else f"p{self.count}"
            self.g.add_retrieval(nid, topk=rng.randint(1, 4), query=query, output=out)
            scope.passages.add(out)
            self.all_passages.add(out)
            return nid
        nid = self._id("g")
        names = rng.sample(sorted(scope.text), rng.randint(1, len(scope.text)))
        if scope.passages and rng.random() < 0.6:
            names.insert(rng.randint(0, len(names)), rng.choice(sorted(scope.passages)))
        prompt = "Task " + nid + ":\n" + "\n".join(f"{n}: {{{n}}}" for n in names)
        reuse = rng.random() < 0.3 and len(scope.text) > 1
        out = rng.choice(sorted(scope.text - {"question"})) if reuse else f"t{self.count}"
        self.g.add_generation(nid, prompt=prompt, output=out, append=reuse and rng.random() < 0.5)
        scope.text.add(out)
        self.all_text.add(out)
        return nid

    def seq(self, depth: int, scope: _Scope) -> tuple[str, str, _Scope]:
        parts = []
        for _ in range(self.rng.randint(1, 4)):
            pick = self.rng.random() if self.count < MAX_NODES else 1.0
            if self.count >= MAX_NODES and parts:
                break
            if depth < 2 and pick < 0.2:
                parts.append(self.diamond(depth, scope))
            elif depth < 2 and pick < 0.4:
                parts.append(self.loop(depth, scope))
            elif pick < 0.5:
                parts.append(self.fanout(scope))
            else:
                nid = self.node(scope)
                parts.append((nid, nid))
        for (_, a), (b, _) in zip(parts, parts[1:], strict=False):
            self.g.add_edge(a, b)
        return parts[0][0], parts[-1][1], scope

    def fanout(self, scope: _Scope) -> tuple[str, str]:
        """A list output, a map over it (a retrieval, or a generation that may read passages),
        and a merge of the map's results into a fresh variable."""
        rng = self.rng
        head = self._id("l")
        items = f"items{self.count}"
        self.g.add_generation(head, prompt=f"List {head}: {{{rng.choice(sorted(scope.text))}}}",
                              output=items, items=rng.randint(1, 4))
        mapped = self._id("m")
        results = f"each{self.count}"
        retrieves = rng.random() < 0.5
        if retrieves:
            self.g.add_retrieval(mapped, topk=rng.randint(1, 3), query="{x} {question}",
                                 output=results, each={"x": items})
        else:
            context = rng.choice(sorted(scope.passages | scope.text))
            self.g.add_generation(mapped, prompt=f"Item: {{x}}\n{{{context}}}", output=results,
                                  each={"x": items})
        merge = self._id("f")
        method = rng.choice(["rrf", "dedup", "concat"]) if retrieves else "concat"
        self.g.add_merge(merge, method, input=results, output=f"v{self.count}")
        (scope.passages if retrieves else scope.text).add(f"v{self.count}")
        self.g.add_edge(head, mapped)
        self.g.add_edge(mapped, merge)
        return head, merge

    def _condition(self, scope: _Scope) -> str:
        var = self.rng.choice(sorted(scope.text))
        if self.rng.random() < 0.5:
            return f"len({var}) < {self.rng.randint(10, 40)}"
        return f'{var} contains "{self.rng.choice("abcdef0123")}"'

    def diamond(self, depth: int, scope: _Scope) -> tuple[str, str]:
        head = self.node(scope)
        cond = self._condition(scope)
        a_first, a_last, a_scope = self.seq(depth + 1, _Scope(set(scope.text), set(scope.passages)))
        merge_scope = _Scope(set(scope.text), set(scope.passages))
        if self.rng.random() < 0.5:
            b_first, b_last, b_scope = self.seq(depth + 1, _Scope(set(scope.text),
                                                                  set(scope.passages)))
        else:
            b_first = b_last = None
            b_scope = merge_scope
        scope.text &= a_scope.text & b_scope.text
        scope.passages &= a_scope.passages & b_scope.passages
        merge = self.node(scope)
        self.g.add_edge(head, a_first, when=cond)
        self.g.add_edge(head, b_first or merge)
        self.g.add_edge(a_last, merge)
        if b_last is not None:
            self.g.add_edge(b_last, merge)
        return head, merge

    def loop(self, depth: int, scope: _Scope) -> tuple[str, str]:
        first, last, _ = self.seq(depth + 1, scope)
        when = self._condition(scope) if self.rng.random() < 0.7 else None
        self.g.add_edge(last, first, when=when, max_iters=self.rng.randint(1, 3))
        tail = self.node(scope)  # the loop exit continues on a plain edge
        self.g.add_edge(last, tail)
        return first, tail


def random_graph(seed: int) -> RAGraph:
    return RandomGraph(seed).build()
