"""Prompt and query templates: text with `{variable}` holes; `{{` and `}}` are literal braces."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ragraph.errors import WorkflowError
from ragraph.ir.values import Value, render_value

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Hole:
    name: str
    offset: int  # character offset of the `{` in the template text


@dataclass(frozen=True)
class Template:
    """A parsed template. Equality is by text; holes are derived from it."""

    text: str
    holes: tuple[Hole, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> Template:
        return cls(text, tuple(_scan(text)))

    @classmethod
    def variable(cls, name: str) -> Template:
        return cls.parse("{" + name + "}")

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(h.name for h in self.holes)

    @property
    def single_variable(self) -> str | None:
        """The variable name when the template is exactly one hole, like `{passage}`."""
        if len(self.holes) == 1 and self.text == "{" + self.holes[0].name + "}":
            return self.holes[0].name
        return None

    def render(self, state: Mapping[str, Value]) -> str:
        return "".join(
            seg if isinstance(seg, str) else render_value(state[seg.name])
            for seg in self.segments()
        )

    def segments(self) -> tuple[str | Hole, ...]:
        """Literal text and holes in order (used by the prefix-layout pass and printers)."""
        out: list[str | Hole] = []
        pos = 0
        for hole in self.holes:
            if hole.offset > pos:
                out.append(_unescape(self.text[pos : hole.offset]))
            out.append(hole)
            pos = hole.offset + len(hole.name) + 2
        if pos < len(self.text):
            out.append(_unescape(self.text[pos:]))
        return tuple(out)


def _unescape(text: str) -> str:
    return text.replace("{{", "{").replace("}}", "}")


def _scan(text: str):
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "{" and text.startswith("{{", i):
            i += 2
        elif ch == "}" and text.startswith("}}", i):
            i += 2
        elif ch == "{":
            end = text.find("}", i + 1)
            if end < 0:
                raise TemplateError("unclosed '{' in template", i, "write '{{' for a literal brace")
            name = text[i + 1 : end].strip()
            if not _IDENT.match(name) or name != text[i + 1 : end]:
                raise TemplateError(
                    f"'{{{text[i + 1 : end]}}}' is not a variable hole", i,
                    "holes are {name}; write '{{' and '}}' for literal braces",
                )
            yield Hole(name, i)
            i = end + 1
        elif ch == "}":
            raise TemplateError("unmatched '}' in template", i, "write '}}' for a literal brace")
        else:
            i += 1


class TemplateError(WorkflowError):
    """A malformed template; `offset` is the character offset within the template text."""

    def __init__(self, message: str, offset: int, hint: str | None = None) -> None:
        self.offset = offset
        super().__init__(message, hint=hint)


