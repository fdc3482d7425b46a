"""A thin owner of llama.cpp's low-level objects: model, context, one batch, the KV memory.

Only the decode thread calls into it after construction. The KV cache has one stream per
sequence id (`kv_unified=False`, see `llamacpp_slots` for why); a prefix moves between streams
as a whole-stream copy cut to the prefix.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

import llama_cpp
import numpy as np

from ragraph.errors import EngineError
from ragraph.runtime.llm.llamacpp.logs import silent_here
from ragraph.runtime.quiet import logger_level


@dataclass(frozen=True)
class ContextShape:
    n_ctx_seq: int  # KV cells of each sequence's stream: its prompt plus generated tokens
    n_batch: int  # tokens per llama_decode call
    n_seq_max: int  # distinct sequence ids, one KV stream each
    n_threads: int
    # llama.cpp's extra weight buffer types (AMX tiles, repacked layouts). Off by default: on
    # CPUs with AMX (Sapphire Rapids, as on this project's machines) a native build of
    # llama-cpp-python 0.3.36 crashes in ggml_backend_amx_mul_mat during llama_decode.
    extra_buffers: bool = False


@dataclass(frozen=True)
class BatchEntry:
    token: int
    pos: int
    seq_id: int
    logits: bool


@contextlib.contextmanager
def _quiet(verbose: bool, install: bool = False) -> Iterator[None]:
    """llama.cpp's lines from this thread dropped inside the block (logs.py), unless verbose:
    then printed, llama-cpp-python's logger at DEBUG for the block."""
    if verbose:
        with logger_level("llama-cpp-python", logging.DEBUG):
            yield
        return
    with silent_here(install=install):
        yield


class LlamaModel:
    def __init__(self, path: str, shape: ContextShape, verbose: bool = False) -> None:
        if not os.path.isfile(path):
            raise EngineError(f"model file not found: {path!r} (give the path of a GGUF file)")
        # llama.cpp logs as it loads, decodes and frees; a CLI answer must not come with that,
        # and the host's own llama.cpp use keeps its logging (logs.py). Errors still surface as
        # EngineError.
        self._verbose = verbose
        with _quiet(verbose, install=True):
            self._load(path, shape)

    def _load(self, path: str, shape: ContextShape) -> None:
        llama_cpp.llama_backend_init()
        self.shape = shape
        mparams = llama_cpp.llama_model_default_params()
        mparams.use_extra_bufts = shape.extra_buffers
        self.model = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), mparams)
        if not self.model:
            raise EngineError(f"llama.cpp could not load {path!r} (not a GGUF model it supports?)")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(self.model))
        self.n_swa = int(llama_cpp.llama_model_n_swa(self.model))
        self.ctx = llama_cpp.llama_init_from_model(self.model, self._context_params(shape))
        if not self.ctx:
            llama_cpp.llama_model_free(self.model)
            raise EngineError(f"llama.cpp could not create a context for {path!r}")
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(shape.n_batch, 0, 1)
        self._tokens = np.ctypeslib.as_array(self.batch.token, shape=(shape.n_batch,))
        self._pos = np.ctypeslib.as_array(self.batch.pos, shape=(shape.n_batch,))
        self._n_seq = np.ctypeslib.as_array(self.batch.n_seq_id, shape=(shape.n_batch,))
        self._logits = np.ctypeslib.as_array(self.batch.logits, shape=(shape.n_batch,))
        self._seq_rows = [self.batch.seq_id[i] for i in range(shape.n_batch)]
        self._pieces: dict[int, bytes] = {}
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self.bos = int(llama_cpp.llama_vocab_bos(self.vocab))

    @staticmethod
    def _context_params(shape: ContextShape) -> llama_cpp.llama_context_params:
        p = llama_cpp.llama_context_default_params()
        p.n_ctx = shape.n_ctx_seq * shape.n_seq_max
        p.n_batch = shape.n_batch
        p.n_ubatch = shape.n_batch
        p.n_seq_max = shape.n_seq_max
        p.n_threads = shape.n_threads
        p.n_threads_batch = shape.n_threads
        p.kv_unified = False
        # Full-size SWA cache: Gemma-3's sliding-window layers otherwise keep only the last
        # window per sequence, and a shorter window cache cannot serve shared prefixes.
        p.swa_full = True
        # Same attention kernels as llama_cpp.Llama's default (flash_attn=False), so greedy
        # output matches create_completion.
        p.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        p.no_perf = True
        return p

    def close(self) -> None:
        if self.ctx:
            with _quiet(self._verbose):
                llama_cpp.llama_batch_free(self.batch)
                llama_cpp.llama_free(self.ctx)
                llama_cpp.llama_model_free(self.model)
            self.ctx = None

    # -- text ------------------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        """Prompt tokens exactly as `Llama.create_completion` makes them: BOS (when the model
        wants one), then the text with special tokens parsed."""
        data = text.encode("utf-8")
        cap = len(data) + 8
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, cap, False, True)
        if n < 0:
            raise EngineError(f"llama.cpp could not tokenize the prompt (code {n})")
        head = [self.bos] if self.add_bos and self.bos >= 0 else []
        return head + list(buf[:n])

    def piece(self, token: int) -> bytes:
        cached = self._pieces.get(token)
        if cached is None:
            buf = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
            cached = buf.raw[:n]
            self._pieces[token] = cached
        return cached

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    # -- decoding --------------------------------------------------------------------------------

    def decode(self, entries: list[BatchEntry]) -> int:
        """One llama_decode over `entries`; returns llama.cpp's status (0 = ok, 1 = no KV slot)."""
        n = len(entries)
        for i, e in enumerate(entries):
            self._tokens[i] = e.token
            self._pos[i] = e.pos
            self._seq_rows[i][0] = e.seq_id
            self._logits[i] = 1 if e.logits else 0
        self._n_seq[:n] = 1
        self.batch.n_tokens = n
        with _quiet(self._verbose):
            return int(llama_cpp.llama_decode(self.ctx, self.batch))

    def logits(self, i: int) -> np.ndarray:
        """The logits row of batch entry `i`: a view on llama.cpp's buffer, valid until the next
        decode (no copy of the vocabulary-sized row)."""
        ptr = llama_cpp.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    # -- KV sequences ----------------------------------------------------------------------------

    def seq_rm(self, seq_id: int) -> None:
        with _quiet(self._verbose):
            llama_cpp.llama_memory_seq_rm(self.memory, seq_id, -1, -1)

    def seq_keep(self, seq_id: int, n_tokens: int) -> None:
        """Drop `seq_id`'s KV from position `n_tokens` on."""
        with _quiet(self._verbose):
            llama_cpp.llama_memory_seq_rm(self.memory, seq_id, n_tokens, -1)

    def seq_copy(self, src: int, dst: int) -> None:
        """Give `dst` all of `src`'s KV. Across streams llama.cpp copies only whole streams, and
        does so at the start of the next decode, in the order the copies were asked for."""
        with _quiet(self._verbose):
            llama_cpp.llama_memory_seq_cp(self.memory, src, dst, -1, -1)

    def seq_pos_min(self, seq_id: int) -> int:
        return int(llama_cpp.llama_memory_seq_pos_min(self.memory, seq_id))
