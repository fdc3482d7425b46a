"""The preprocessing hook: a Python callable in the API and `--preprocess CMD` on the command
line rewrite each document's text before it is cut; offsets index the rewritten text, and a hook
that fails names its document (skipped under --skip-bad)."""

from __future__ import annotations

import sys

import pytest

from ragraph.cli.main import main
from ragraph.runtime.retrieval.build.documents import DocumentError, read_document
from ragraph.runtime.retrieval.build.preprocess import command_hook
from ragraph.runtime.retrieval.manifest import load_index

from .documents_data import sentences

FRONT = "---\ntitle: secretword\ndraft: true\n---\n"


def _drop_front_matter(path, text):
    return text.split("---\n", 2)[2] if text.startswith("---\n") else text


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(f"{FRONT}# Volcano\n\n{sentences(1, 4)}\n", encoding="utf-8")
    (folder / "b.txt").write_text(sentences(2, 4) + "\n", encoding="utf-8")
    return folder


def test_a_python_hook_rewrites_before_titles_and_cuts(docs, tiny_embedder_dir, tmp_path):
    from ragraph.runtime.retrieval.build.ingest import build_index

    doc = read_document(docs / "a.md", _drop_front_matter)
    assert doc.title == "Volcano" and doc.text.startswith("# Volcano")
    out = tmp_path / "idx"
    build_index([docs], out, embedder=str(tiny_embedder_dir), preprocess=_drop_front_matter)
    loaded = load_index(out)
    passages = loaded.store.lookup(range(loaded.manifest.passages)).items
    assert passages and all("secretword" not in p.text for p in passages)
    for p in passages:  # offsets index the preprocessed text
        assert read_document(docs / p.origin.source, _drop_front_matter).text[
            p.origin.start:p.origin.end] == p.text


def test_a_command_hook_filters_each_document(docs, tiny_embedder_dir, tmp_path, capsys):
    script = tmp_path / "upper.py"
    script.write_text("import os, sys\nsys.stdout.write(sys.stdin.read().replace('---', '===')"
                      " + '\\nfrom ' + os.path.basename(os.environ['RAGRAPH_DOCUMENT']))\n")
    out = tmp_path / "idx"
    assert main(["index", "build", "--docs", str(docs), "--out", str(out), "--nlist", "1",
                 "--embedder", str(tiny_embedder_dir),
                 "--preprocess", f"{sys.executable} {script}"]) == 0
    loaded = load_index(out)
    texts = [p.text for p in loaded.store.lookup(range(loaded.manifest.passages))]
    assert any("from a.md" in t for t in texts) and any("from b.txt" in t for t in texts)
    assert any("===" in t for t in texts) and not any("---" in t for t in texts)


def test_a_failing_hook_names_its_document(docs, tiny_embedder_dir, tmp_path, capsys):
    hook = command_hook("echo no good >&2; exit 3")
    with pytest.raises(DocumentError, match=r"a.md: --preprocess .* failed \(exit 3: no good\)"):
        read_document(docs / "a.md", hook)

    def broken(path, text):
        raise KeyError("include")

    with pytest.raises(DocumentError, match=r"b.txt: the preprocess hook failed \(KeyError"):
        read_document(docs / "b.txt", broken)
    with pytest.raises(DocumentError, match="returned NoneType, not text"):
        read_document(docs / "b.txt", lambda path, text: None)
    out = tmp_path / "idx"
    argv = ["index", "build", "--docs", str(docs), "--out", str(out), "--nlist", "1",
            "--embedder", str(tiny_embedder_dir), "--preprocess",
            'case "$RAGRAPH_DOCUMENT" in *a.md) exit 1;; esac; cat']
    assert main([*argv, "--skip-bad"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "skipped" in err and "a.md: --preprocess" in err
    assert [p.origin.source for p in load_index(out).store.lookup([0])] == [str(docs / "b.txt")]


def test_the_runtime_passes_the_hook_and_links_on(monkeypatch, tmp_path):
    import ragraph
    from ragraph.runtime.retrieval.build import ingest

    seen: dict = {}
    monkeypatch.setattr(ingest, "build_index", lambda files, out, **kw: seen.update(kw) or out)
    with ragraph.Runtime(engine="sim") as rt:
        rt.index([tmp_path], out=tmp_path / "idx", preprocess=_drop_front_matter,
                 follow_links=True)
    assert seen == {"skip_bad": False, "follow_links": True, "preprocess": _drop_front_matter}
