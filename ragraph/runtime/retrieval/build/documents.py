"""Reading a user's documents: text, Markdown, HTML and PDF files, and folders of them.

A document is its path, a title and its text. Text and Markdown are the file's own characters
(UTF-8), so a passage's offsets index the file as an editor shows it. HTML is its visible text
(beautifulsoup4 on the standard library's parser: no compiled dependency; script, style and
template contents dropped) and PDF its pages' extracted text joined by blank lines (pypdf: pure
Python, maintained, no system library); offsets index that text. The title is the Markdown file's
first heading, the HTML <title> or first <h1>, the PDF's /Title, else the file's name.

Folders are walked by walk.py. A file that cannot be read (not UTF-8, a name that is not UTF-8,
a corrupt PDF, a PDF without a text layer) is a `DocumentError` naming it; with `skip_bad` it is
skipped and listed instead. Every such check runs here, before anything is embedded.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragraph.errors import SearchIndexError
from ragraph.runtime.quiet import logger_level

if TYPE_CHECKING:
    from ragraph.runtime.retrieval.build.preprocess import Preprocess

KINDS = {".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown",
         ".html": "html", ".htm": "html", ".pdf": "pdf"}
_MD_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


class DocumentError(SearchIndexError):
    """A document that cannot be read: the message starts with its path."""


@dataclass(frozen=True)
class Document:
    source: str  # the file's absolute path
    title: str
    text: str
    kind: str


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def read_documents(files: Iterable[Path], skip_bad: bool = False,
                   preprocess: Preprocess | None = None) -> tuple[list[Document], list[Skipped]]:
    """Every file read; a bad one raises, or with `skip_bad` is listed among the skipped."""
    documents: list[Document] = []
    skipped: list[Skipped] = []
    for path in files:
        try:
            documents.append(read_document(path, preprocess))
        except DocumentError as err:
            if not skip_bad:
                raise
            skipped.append(Skipped(path, str(err).removeprefix(f"{shown(path)}: ")))
    return documents, skipped


def read_document(path: Path, preprocess: Preprocess | None = None) -> Document:
    """`path` read as its kind says; `preprocess` (preprocess.py) rewrites its text first."""
    from ragraph.runtime.retrieval.build.preprocess import applied

    kind = KINDS.get(path.suffix.lower())
    if kind is None:
        raise DocumentError(f"{shown(path)}: not a document kind ragraph reads")
    if not _is_unicode(str(path)):
        # Checked before anything is embedded: the store and every answer hold the name as text.
        raise DocumentError(f"{shown(path)}: its name is not UTF-8; rename it")
    if kind == "pdf":
        title, text = _pdf(path)
        text = applied(preprocess, path, text)
    else:
        raw = applied(preprocess, path, _utf8(path))
        title, text = _html(path, raw) if kind == "html" else (_md_title(raw, kind), raw)
    if not text.strip():
        raise DocumentError(f"{path}: no text in it" + (" (a scanned PDF needs OCR first)"
                                                        if kind == "pdf" else ""))
    if not (_is_unicode(text) and _is_unicode(title)):
        raise DocumentError(f"{path}: its text holds code points that are not characters "
                            "(lone surrogates)")
    return Document(str(path), title or path.stem, text, kind)


def shown(path: Path | str) -> str:
    """`path` printable: bytes of its name that are not UTF-8 as `\\xff` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def need(module: str):
    """`module` of the documents extra, or an error saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise SearchIndexError(f"reading documents needs the documents extra ({err}); install "
                               "it with `pip install 'ragraph[documents]'`") from err


def _utf8(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8-sig")
    except OSError as err:
        raise DocumentError(f"{path}: cannot read it ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise DocumentError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from err


def _md_title(text: str, kind: str) -> str:
    if kind != "markdown":
        return ""
    match = _MD_HEADING.search(text)
    return match.group(1).strip() if match else ""


def _html(path: Path, raw: str) -> tuple[str, str]:
    soup = need("bs4").BeautifulSoup(raw, "html.parser")
    for hidden in soup(["script", "style", "template", "noscript"]):
        hidden.decompose()
    heading = soup.title or soup.find("h1")
    title = heading.get_text(" ", strip=True) if heading is not None else ""
    body = soup.body or soup
    lines = (line.strip() for line in body.get_text("\n").splitlines())
    return title, "\n".join(line for line in lines if line)


def _pdf(path: Path) -> tuple[str, str]:
    PdfReader = need("pypdf").PdfReader
    PyPdfError = need("pypdf.errors").PyPdfError

    # pypdf logs what it repairs or gives up on without the file's name; the error raised below
    # names the file, and a repaired file reads fine.
    try:
        with logger_level("pypdf", logging.ERROR):
            reader = PdfReader(path)
            if reader.is_encrypted:
                raise DocumentError(f"{path}: the PDF is encrypted")
            pages = [page.extract_text() or "" for page in reader.pages]
            meta = reader.metadata
            title = str(meta.title).strip() if meta is not None and meta.title else ""
    except OSError as err:
        raise DocumentError(f"{path}: cannot read it ({err.strerror or err})") from err
    except (PyPdfError, ValueError, KeyError, TypeError) as err:
        raise DocumentError(f"{path}: not a readable PDF ({err or type(err).__name__})") from err
    return title, "\n\n".join(p.strip() for p in pages if p.strip())
