"""ragraph's own error types.

Every error a user can cause is a `RagraphError`; the CLI prints it and exits with status 2, never
with a traceback. Errors that point into a `.rag` file carry a `Span` and render as
`file:line:col: message`, the source line and a caret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

# Who a failed request's error belongs to; the server answers each with its own status (the
# client's mistake 400, an upstream engine's fault 502, the workflow's or a bug 500).
FailureKind = Literal["input", "engine", "workflow", "cancelled", "internal"]


@dataclass(frozen=True)
class Span:
    """A position in a source text: 1-based line and column, with optional end."""

    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None
    file: str | None = None

    def __str__(self) -> str:
        return f"{self.file or '<input>'}:{self.line}:{self.col}"


class RagraphError(Exception):
    """Base class for every error ragraph reports to a user."""

    kind: ClassVar[FailureKind] = "workflow"

    def __reduce__(self):  # noqa: ANN204 - pickle's protocol
        # Raised in another process (a bench's index build, a Ray task), an error comes back
        # whole whatever its __init__ takes: the default calls the class with `args` alone,
        # which fails for ConfigError(field, message) or RequestFailed(message, kind) and drops
        # a WorkflowError's place.
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[RagraphError], args: tuple, state: dict) -> RagraphError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class WorkflowError(RagraphError):
    """A mistake in a workflow: located when it came from a `.rag` file, named by node otherwise."""

    def __init__(
        self,
        message: str,
        span: Span | None = None,
        source: str | None = None,
        node: str | None = None,
        hint: str | None = None,
        context: str | None = None,
    ) -> None:
        self.message = message
        self.context = context
        self.span = span
        self.source = source
        self.node = node
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.span}: error: {self.message}" if self.span else f"error: {self.message}"
        lines = [head]
        if self.span and self.source is not None:
            src_lines = self.source.splitlines()
            if 1 <= self.span.line <= len(src_lines):
                text = src_lines[self.span.line - 1].expandtabs(1)
                lines.append(f"  {text}")
                lines.append("  " + " " * max(self.span.col - 1, 0) + "^")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        if self.context:
            lines.append("  in:")
            lines.extend("    " + line for line in self.context.splitlines())
        return "\n".join(lines)

    def located(self, span: Span | None, source: str | None) -> WorkflowError:
        """The same error, placed at `span` in `source` (keeps an existing span)."""
        return WorkflowError(
            self.message,
            span=self.span or span,
            source=source if self.source is None else self.source,
            node=self.node,
            hint=self.hint,
            context=self.context,
        )


class ConfigError(RagraphError, ValueError):
    """An invalid configuration or request field; the message names the field."""

    kind: ClassVar[FailureKind] = "input"

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class EngineError(RagraphError):
    """An engine could not serve one request; other requests are unaffected."""

    kind: ClassVar[FailureKind] = "engine"


class PromptTooLong(EngineError):
    """A prompt the model's context cannot hold: the request asked for more than the engine
    has (a question too long for the model, or a workflow whose prompts outgrow it)."""

    kind: ClassVar[FailureKind] = "input"


class SearchIndexError(RagraphError):
    """A missing, corrupt or mismatched search index."""

    kind: ClassVar[FailureKind] = "engine"


class RequestFailed(RagraphError):
    """A request that ran and failed (`Runtime.run`): the message is its error, `kind` whose
    fault it was (the run's own attribution) and `answer` what it reached before failing."""

    def __init__(self, message: str, kind: FailureKind, answer: object = None) -> None:
        self.kind = kind  # type: ignore[misc] - per failure, not per class
        self.answer = answer
        super().__init__(message)


class RuntimeClosed(RagraphError):
    """A call on a `Runtime` that is not open (never entered, or closed)."""

    kind: ClassVar[FailureKind] = "cancelled"


def failure_kind(err: BaseException) -> FailureKind:
    """Whose fault a request's error is: ragraph's own errors say; anything else is a bug."""
    return err.kind if isinstance(err, RagraphError) else "internal"
