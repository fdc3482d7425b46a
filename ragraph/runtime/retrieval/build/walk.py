"""Finding the documents under the paths a user gives, without leaving them.

A folder given to `--docs` is walked recursively in sorted order. Every symbolic link inside it
is resolved: one that leads outside the folder is refused (a folder unpacked from an archive must
not pull in `~/.ssh/id_rsa`) unless the caller asks to follow links, and a dangling link or a loop
is refused too; a link that stays inside is read once, under its real path, whether it names a
file or a folder. Anything that is neither a folder nor a regular file (a FIFO, a socket, a
device) is refused without being opened: reading a FIFO would wait forever. Each refusal is a
`Skipped` with its reason, reported once the build ends, never silent.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragraph.runtime.retrieval.build.documents import KINDS, DocumentError, Skipped, shown


@dataclass(frozen=True)
class Found:
    """The files to read, the files skipped inside folders as not of a kind read here, and the
    paths refused (links leaving the folder, dangling links, loops, special files, bad names)."""

    files: tuple[Path, ...]
    other_kinds: tuple[Path, ...]
    refused: tuple[Skipped, ...] = ()


def find_documents(paths: Sequence[Path], follow_links: bool = False) -> Found:
    """The documents under `paths` (files and folders, recursively), each once, in order.
    `follow_links`: read links that lead outside the folders given too."""
    given = [Path(p).expanduser() for p in paths]
    walk = _Walk(follow_links, [p.resolve() for p in given if p.is_dir()])
    for path in given:
        walk.given(path)
    unique = tuple(dict.fromkeys(walk.files))
    if not unique:
        raise DocumentError(f"{', '.join(map(shown, paths))}: no documents to read (kinds: "
                            f"{', '.join(sorted(KINDS))})")
    return Found(unique, tuple(walk.other), tuple(walk.refused))


class _Walk:
    def __init__(self, follow_links: bool, roots: list[Path]) -> None:
        self.follow_links = follow_links
        self._roots = roots
        self.files: list[Path] = []
        self.other: list[Path] = []
        self.refused: list[Skipped] = []
        self._seen: set[Path] = set()

    def given(self, path: Path) -> None:
        """A path the user named: read whatever it is a link to, since they chose it."""
        try:
            mode = path.stat().st_mode
        except OSError as err:
            raise DocumentError(f"{shown(path)}: no such file or folder"
                                + ("" if isinstance(err, FileNotFoundError)
                                   else f" ({err.strerror})")) from err
        real = path.resolve()
        if stat.S_ISDIR(mode):
            self._folder(real)
        elif not stat.S_ISREG(mode):
            raise DocumentError(f"{shown(path)}: not a regular file or folder")
        elif path.suffix.lower() not in KINDS:
            raise DocumentError(f"{shown(path)}: not a document kind ragraph reads (it reads "
                                f"{', '.join(sorted(KINDS))})")
        else:
            self.files.append(real)

    def _folder(self, folder: Path) -> None:
        if folder in self._seen:
            return  # reached again through a link: its files are listed already
        self._seen.add(folder)
        try:
            entries = sorted(folder.iterdir())
        except OSError as err:
            self._refuse(folder, f"cannot list it ({err.strerror})")
            return
        for entry in entries:
            self._entry(entry)

    def _entry(self, entry: Path) -> None:
        real = entry
        if entry.is_symlink():
            real = self._through_link(entry)
            if real is None:
                return
        try:
            mode = real.stat().st_mode
        except OSError as err:
            self._refuse(entry, f"cannot read it ({err.strerror})")
            return
        if stat.S_ISDIR(mode):
            self._folder(real)
        elif not stat.S_ISREG(mode):
            self._refuse(entry, "not a regular file (a FIFO, socket or device is never opened)")
        elif real.suffix.lower() not in KINDS:
            self.other.append(real)
        else:
            self.files.append(real)

    def _through_link(self, link: Path) -> Path | None:
        """Where `link` leads, or None when it is refused."""
        try:
            real = link.resolve(strict=True)
        except RuntimeError:  # Python < 3.13 names a loop this way
            self._refuse(link, "a symbolic link loop")
            return None
        except OSError as err:
            loop = err.errno == errno.ELOOP
            self._refuse(link, "a symbolic link loop" if loop else
                         f"a dangling symbolic link (to {shown(os.readlink(link))})")
            return None
        if not self.follow_links and not any(real.is_relative_to(r) for r in self._roots):
            self._refuse(link, f"a symbolic link to {shown(real)}, outside the folder "
                               "(--follow-links reads it)")
            return None
        return real

    def _refuse(self, path: Path, reason: str) -> None:
        self.refused.append(Skipped(path, reason))

