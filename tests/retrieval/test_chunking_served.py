"""Documents embedded by a server are split by the served model's tokenizer on this machine;
when there is none, the error says how to give it and suggests no hub name that may not exist."""

from __future__ import annotations

import pytest

from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.build.chunking import _tokenizer_of
from ragraph.runtime.retrieval.embed.spec import EmbedderSpec


def test_a_served_model_without_a_local_tokenizer_says_how_to_give_one():
    spec = EmbedderSpec("e5-small-q4", 384, source="openai-http")
    with pytest.raises(SearchIndexError) as caught:
        _tokenizer_of(spec)
    message = str(caught.value)
    assert "names its model 'e5-small-q4'" in message and "--embedder" in message
    assert "hf download" not in message
