"""`ragraph` with the tests' in-memory search (real faiss over random vectors, a hashing
embedder: `tests/runtime/fakes.py`) in place of an index on disk, so a batch run needs no
embedder model and starts in seconds. In-process: `use_fake_search(monkeypatch)`; as a real
process for signals: `python -m tests.cli.fake_search run ...` (the arguments of `ragraph`)."""

from __future__ import annotations

import sys

from ragraph.cli import run_batch


async def _fake_open_run(config, err):  # noqa: ANN001, ANN202 - open_run's signature
    from tests.runtime.fakes import random_search

    return random_search()


def use_fake_search(monkeypatch) -> None:  # noqa: ANN001 - pytest's MonkeyPatch
    monkeypatch.setattr(run_batch, "open_run", _fake_open_run)


if __name__ == "__main__":
    from ragraph.cli.main import main

    run_batch.open_run = _fake_open_run
    sys.exit(main(sys.argv[1:]))
