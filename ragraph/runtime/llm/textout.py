"""Turning decoded tokens into output text: incremental UTF-8 and stop strings.

Shared by every engine that decodes tokens itself (llama.cpp, simulated), so stop strings behave
the same everywhere: OpenAI semantics, the output ends before the first occurrence of any stop
string, even when the stop string is split across tokens. Text that might be the start of a stop
string is held back until it is known not to be.
"""

from __future__ import annotations

import codecs


class OutputText:
    """The output of one sequence, fed one token's bytes (or text) at a time."""

    def __init__(self, stop: tuple[str, ...] = ()) -> None:
        # "replace" only matters at the very end: a token that splits a multi-byte character is
        # held by the incremental decoder until the next token completes it.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = stop
        self._text = ""
        self._emitted = 0
        self.stopped = False

    @property
    def text(self) -> str:
        """The text emitted so far (never contains a stop string)."""
        return self._text[: self._emitted]

    def add(self, piece: bytes | str) -> str:
        """Append one token's piece; return the text that may be emitted now."""
        if self.stopped:
            return ""
        self._text += self._decoder.decode(piece) if isinstance(piece, bytes) else piece
        if not self._stop:
            return self._emit(len(self._text))
        hit = self._first_stop()
        if hit is not None:
            self.stopped = True
            return self._emit(hit)
        return self._emit(len(self._text) - self._held_back())

    def flush(self) -> str:
        """The sequence ended without a stop string: release everything held back."""
        if self.stopped:
            return ""
        self._text += self._decoder.decode(b"", final=True)
        return self._emit(len(self._text))

    def _emit(self, end: int) -> str:
        delta = self._text[self._emitted : end]
        self._emitted = max(self._emitted, end)
        return delta

    def _first_stop(self) -> int | None:
        # Any match starts at or after `_emitted`: text that could begin a match is held back.
        found = [i for s in self._stop if (i := self._text.find(s, self._emitted)) >= 0]
        return min(found) if found else None

    def _held_back(self) -> int:
        """Length of the longest tail of the text that is a proper prefix of a stop string."""
        tail = self._text[self._emitted :]
        best = 0
        for s in self._stop:
            for n in range(min(len(s) - 1, len(tail)), best, -1):
                if tail.endswith(s[:n]):
                    best = n
                    break
        return best
