"""Documents the ingestion tests write: text, Markdown, HTML and a real PDF, worded from the tiny
model's vocabulary (tiny_models.WORDS) so every passage embeds to its own vector."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .tiny_models import WORDS

CONTENT = [w for w in WORDS if len(w) > 3]


def sentences(seed: int, count: int) -> str:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        words = rng.choice(CONTENT, size=int(rng.integers(6, 12)))
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def write_text(path: Path, seed: int, paragraphs: int = 3) -> Path:
    path.write_text("\n\n".join(sentences(seed * 100 + i, 4) for i in range(paragraphs)) + "\n",
                    encoding="utf-8")
    return path


def write_markdown(path: Path, seed: int, title: str) -> Path:
    body = "\n\n".join(f"## Part {i}\n\n{sentences(seed * 100 + i, 4)}" for i in range(3))
    path.write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    return path


def write_html(path: Path, seed: int, title: str) -> Path:
    paragraphs = "".join(f"<p>{sentences(seed * 100 + i, 4)}</p>\n" for i in range(3))
    path.write_text(f"<!doctype html><html><head><title>{title}</title>"
                    "<style>p {{ color: red }}</style><script>var hidden = 1;</script></head>"
                    f"<body><h1>{title}</h1>\n{paragraphs}</body></html>\n", encoding="utf-8")
    return path


def write_pdf(path: Path, seed: int, title: str) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    for page in range(2):
        pdf.add_page()
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, sentences(seed * 100 + page, 6))
    pdf.output(str(path))
    return path


def write_folder(folder: Path, seeds: range) -> list[Path]:
    """One document per seed, cycling through the four kinds."""
    folder.mkdir(parents=True, exist_ok=True)
    writers = [
        lambda s: write_text(folder / f"notes-{s}.txt", s),
        lambda s: write_markdown(folder / f"guide-{s}.md", s, f"Guide {s}"),
        lambda s: write_html(folder / f"page-{s}.html", s, f"Page {s}"),
        lambda s: write_pdf(folder / f"paper-{s}.pdf", s, f"Paper {s}"),
    ]
    return [writers[s % 4](s) for s in seeds]
