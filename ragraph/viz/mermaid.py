"""Mermaid flowchart text: one graph, or two subgraphs side by side for --compare.

Mermaid ids are generated (`p0n3`): node ids like `end` or `1.s0` are not valid Mermaid ids, and
the real id is the first line of each label.
"""

from __future__ import annotations

from ragraph.viz.scene import Scene, shorten
from ragraph.viz.style import legend_edges, legend_nodes

# The abstract shapes of style.py as Mermaid node brackets.
_BRACKETS = {
    "ellipse": ("([", "])"),
    "roundbox": ("(", ")"),
    "cylinder": ("[(", ")]"),
    "subbox": ("[[", "]]"),
    "parallelogram": ("[/", "/]"),
    "hexagon": ("{{", "}}"),
    "box": ("[", "]"),
}
# Arrow syntax carries the line pattern; colour and dashes come from linkStyle.
_ARROWS = {"solid": "-->", "bold": "==>", "dashed": "-.->", "dotted": "-.->", "dashdot": "-.->"}
_DASHES = {"dashed": "6 4", "dotted": "2 3", "dashdot": "9 3 2 3"}
_WIDTHS = {"solid": 1.5, "bold": 2.5, "dashed": 1.8, "dotted": 1.8, "dashdot": 2.2}


def render_mermaid(scenes: list[Scene], legend: bool = True) -> str:
    lines = ["flowchart TB"]
    links: list[str] = []  # linkStyle bodies, by link index
    for i, sc in enumerate(scenes):
        body = _scene(sc, f"p{i}", links)
        if len(scenes) == 1:
            lines += ["  " + line for line in body]
        else:
            lines.append(f'  subgraph p{i}g["{text(sc.title)}"]')
            lines.append("    direction TB")
            lines += ["    " + line for line in body]
            lines.append("  end")
    if legend:
        lines += _legend(links)
    lines += _class_defs()
    lines += [f"  linkStyle {i} {style}" for i, style in enumerate(links)]
    return "\n".join(lines) + "\n"


def _scene(sc: Scene, prefix: str, links: list[str]) -> list[str]:
    ids = {n.id: f"{prefix}n{k}" for k, n in enumerate(sc.nodes)}
    out = []
    for n in sc.nodes:
        left, right = _BRACKETS[n.style.shape]
        label = n.id if n.role == "control" else f"{n.id}<br/>{shorten(n.subtitle, 32)}"
        out.append(f'{ids[n.id]}{left}"{text(label)}"{right}:::{_class(n.role)}')
    for e in sc.edges:
        arrow = _ARROWS[e.style.line]
        label = f'|"{text(shorten(e.label, 40))}"|' if e.label else ""
        out.append(f"{ids[e.src]} {arrow}{label} {ids[e.dst]}")
        links.append(_link_style(e.style.line, e.style.color))
    return out


def _link_style(line: str, color: str) -> str:
    style = f"stroke:{color},stroke-width:{_WIDTHS[line]}px,color:{color}"
    return style + (f",stroke-dasharray:{_DASHES[line]}" if line in _DASHES else "")


def _legend(links: list[str]) -> list[str]:
    lines = ['  subgraph legend["legend"]', "    direction TB"]
    for role, st in legend_nodes():
        left, right = _BRACKETS[st.shape]
        lines.append(f'    legend_{role}{left}"{text(st.legend)}"{right}:::{_class(role)}')
    for kind, st in legend_edges():
        a, b = f"legend_{kind.value}_a", f"legend_{kind.value}_b"
        lines.append(f'    {a}[" "]:::legendpoint {_ARROWS[st.line]}|"{text(st.legend)}"| '
                     f'{b}[" "]:::legendpoint')
        links.append(_link_style(st.line, st.color))
    lines.append("  end")
    return lines


def _class_defs() -> list[str]:
    defs = [
        f"  classDef {_class(role)} fill:{st.fill},stroke:{st.stroke},color:{st.text}"
        for role, st in legend_nodes()
    ]
    defs.append("  classDef role_other fill:#f3f4f6,stroke:#4b5563,color:#0f172a")
    defs.append("  classDef legendpoint fill:#ffffff,stroke:#ffffff")
    return defs


def _class(role: str) -> str:
    known = {r for r, _ in legend_nodes()}
    return f"role_{role}" if role in known else "role_other"


def text(s: str) -> str:
    """Mermaid label text: quotes and markup-significant characters as entity codes."""
    out = s.replace("#", "#35;").replace('"', "#quot;").replace("<br/>", "\0")
    out = out.replace("<", "#lt;").replace(">", "#gt;").replace("|", "#124;")
    return out.replace("\0", "<br/>").replace("\n", "<br/>")
