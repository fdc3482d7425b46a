"""ragraph leaves its host process as it found it: loading an embedder or opening a Runtime
sets no environment variable (HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE, GOMP_SPINCOUNT), leaves
torch's thread count, the root logger's level and transformers' progress bar as they were."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _host() -> dict:
    import torch
    from transformers.utils import logging as hf_logging

    return {"env": dict(os.environ), "torch_threads": torch.get_num_threads(),
            "root_level": logging.getLogger().level,
            "library_levels": {name: logging.getLogger(name).level
                               for name in ("llama-cpp-python", "pypdf")},
            "progress_bar": hf_logging.is_progress_bar_enabled()}


def test_loading_an_embedder_model_leaves_the_host_alone(monkeypatch, tmp_path):
    pytest.importorskip("sentence_transformers")
    import sentence_transformers
    import torch

    from ragraph.runtime.retrieval.embed import embedder as module

    seen = {}

    class Loaded:
        def __init__(self, path, device, local_files_only):
            seen.update(threads=torch.get_num_threads(), local_files_only=local_files_only)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Loaded)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    torch.set_num_threads(2)
    before = _host()
    module._load_model(tmp_path, module.EmbedderConfig(threads=1))
    assert seen == {"threads": 1, "local_files_only": True}  # its own count while it loads
    assert _host() == before


PROBE = """
import json, logging, os, sys
sys.path.insert(0, {root!r})
from tests.api.test_host_hygiene import _host
import torch
import sentence_transformers  # its own import sets KMP_* (sklearn's) and torch inductor's cache
torch.set_num_threads(2)
before = _host()
from ragraph.runtime.retrieval.embed.embedder import Embedder, EmbedderConfig, query_embedder
query_embedder(threads=1).embed(["who wrote Middlemarch?"])
Embedder(EmbedderConfig(threads=1)).embed(["Middlemarch is a novel by George Eliot."])
import ragraph
from tests.runtime.fakes import random_search
with ragraph.Runtime(search=random_search(), engine="llamacpp", concurrency=1) as rt:
    rt.run(ragraph.load("oneshot"), "Who wrote Middlemarch?")
after = _host()
env = before.pop("env"), after.pop("env")
changed = {{k: (env[0].get(k), env[1].get(k)) for k in set(env[0]) | set(env[1])
           if env[0].get(k) != env[1].get(k)}}
changed.update({{k: (before[k], after[k]) for k in before if before[k] != after[k]}})
print(json.dumps(changed))
"""


@pytest.mark.slow  # the real MiniLM and Gemma models
def test_the_real_embedder_and_runtime_leave_the_host_alone():
    """In a fresh interpreter that uses sentence-transformers itself, with the hub unreachable
    (nothing needs it either)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "GOMP_SPINCOUNT")}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # a refused connection, should anything try
    out = subprocess.run([sys.executable, "-c", PROBE.format(root=str(ROOT))], env=env,
                         capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1]) == {}


def test_reading_a_pdf_leaves_pypdf_logging_alone(tmp_path):
    pytest.importorskip("pypdf")
    from ragraph.runtime.retrieval.build.documents import DocumentError, _pdf

    logging.getLogger("pypdf").setLevel(logging.INFO)  # the host's own choice
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer <<>>\n%%EOF\n")
    try:
        with pytest.raises(DocumentError):
            _pdf(broken)
        assert logging.getLogger("pypdf").level == logging.INFO
    finally:
        logging.getLogger("pypdf").setLevel(logging.NOTSET)
