"""A request line's own checks: what no engine downstream could read is the line's error."""

from __future__ import annotations

import json

import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.request import Request


@pytest.mark.parametrize("question", ["\ud800", "half \udfff a pair"])
def test_a_lone_surrogate_is_the_lines_input_error(question):
    # It reached the embedder and failed there as "internal error: TypeError".
    with pytest.raises(ConfigError, match=r"in\.jsonl:3: question: not valid Unicode \(a lone "
                       r"surrogate, '\\ud[8f]..', at character \d+\)") as err:
        Request.from_json({"id": "x", "question": question}, "in.jsonl:3")
    assert err.value.kind == "input"


def test_a_whole_pair_is_text():
    # JSON spells a character past U+FFFF as a pair of escapes; decoded, it is one character.
    line = json.loads('{"question": "smile \\ud83d\\ude00"}')
    assert Request.from_json(line, "w").question == "smile \U0001f600"
