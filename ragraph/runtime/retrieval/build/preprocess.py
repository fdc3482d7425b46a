"""A hook that rewrites each document's text before it is read and cut: drop front matter, expand
include directives, strip boilerplate.

In Python it is any callable `(path, text) -> text`; on the command line, `--preprocess CMD` runs
CMD through the shell once per document, with the text on its standard input and the file's path
in `RAGRAPH_DOCUMENT`, and takes its standard output (UTF-8) as the text. The hook sees the file's
own text for text, Markdown and HTML (before headings, titles or tags are read) and the extracted
text for PDF. A hook that fails makes its document a bad file, named with the reason (skipped
under `--skip-bad`). Passage offsets then index the preprocessed text.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from ragraph.runtime.retrieval.build.documents import DocumentError

Preprocess = Callable[[Path, str], str]
COMMAND_TIMEOUT_S = 60.0


def command_hook(command: str, timeout: float = COMMAND_TIMEOUT_S) -> Preprocess:
    """`command` (a shell command line) as a hook: a filter from standard input to output."""

    def run(path: Path, text: str) -> str:
        try:
            done = subprocess.run(command, shell=True, input=text.encode("utf-8"),
                                  capture_output=True, timeout=timeout,
                                  env={**os.environ, "RAGRAPH_DOCUMENT": str(path)})
        except subprocess.TimeoutExpired as err:
            raise DocumentError(f"{path}: --preprocess {command!r} ran over {timeout:g} s") from err
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise DocumentError(f"{path}: --preprocess {command!r} failed (exit "
                                f"{done.returncode}{': ' + said[-1] if said else ''})")
        try:
            return done.stdout.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DocumentError(f"{path}: --preprocess {command!r} wrote text that is not "
                                f"UTF-8 (byte {err.start})") from err

    return run


def applied(hook: Preprocess | None, path: Path, text: str) -> str:
    """`hook`'s text for `path`; any failure of a Python hook is its document's error."""
    if hook is None:
        return text
    try:
        out = hook(path, text)
    except DocumentError:
        raise
    except Exception as err:  # a user's hook: its fault names the file it failed on
        raise DocumentError(f"{path}: the preprocess hook failed ({type(err).__name__}: "
                            f"{err})") from err
    if not isinstance(out, str):
        raise DocumentError(f"{path}: the preprocess hook returned {type(out).__name__}, "
                            "not text")
    return out
