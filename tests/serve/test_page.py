"""The page at `/` in a real headless Chromium (Debian's `chromium`; skipped where it is not on
PATH): the compiled graph is drawn (checked on a screenshot), a question asked in the page
streams its answer, requests move through the graph and the timeline fills, all from this
server alone (no CDN)."""

from __future__ import annotations

import io
import re
from urllib.parse import quote

import pytest

from tests.serve.browser import chromium, headless, when
from tests.serve.conftest import question, reference

pytestmark = pytest.mark.skipif(chromium() is None, reason="chromium is not on PATH")

# The page's own signals: its answer box says the stream ended; its counter of finished
# requests (from the live feed) reached one.
ANSWERED = when("#answer", "['done', 'error'].includes(el.dataset.state) && el.dataset.state")
FINISHED = when("#counts", "Number((el.textContent.match(/(\\d+) finished/) || [0, 0])[1])")
READY = when("body", "el.dataset.ready")
LLM_FILL, SEARCH_FILL = (0xdb, 0xea, 0xfe), (0xdc, 0xfc, 0xe7)  # viz/style.py node fills


def pixels_of(png: bytes, colour: tuple[int, int, int]) -> int:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(count for count, rgb in image.getcolors(image.width * image.height)
               if all(abs(a - b) <= 3 for a, b in zip(rgb, colour, strict=True)))


def test_page_draws_the_graph_streams_an_answer_and_shows_live_work(server):
    q = question(5)
    want = reference([("hyde", q)])[("hyde", q)].answer
    with headless() as page:
        page.open(f"{server.url}/?workflow=hyde&ask={quote(q)}")
        assert page.evaluate(ANSWERED) == "done"
        assert page.evaluate("document.getElementById('answer').textContent") == want
        assert page.evaluate(FINISHED) >= 1
        shown = page.evaluate("""({
            nodes: document.querySelectorAll('#graph svg.graph g.node').length,
            moves: Number(document.getElementById('graph').dataset.moves || 0),
            spans: Number(document.getElementById('timeline').dataset.spans || 0),
            engine: document.getElementById('engine').textContent,
            external: [...document.querySelectorAll('script[src],link[href]')]
                .map(e => e.src || e.href).filter(u => !u.startsWith(location.origin)),
        })""")
        png = page.screenshot()
    assert shown["nodes"] >= 10  # the -O2 graph's sub-stages, not just the workflow's nodes
    assert shown["moves"] >= 5 and shown["spans"] >= 1  # units moved, engine work drawn
    assert shown["external"] == []
    assert re.search(r"SIMULATED\s*engine: sim", shown["engine"])
    # The drawing is on screen: generation and retrieval boxes in their fills.
    assert pixels_of(png, LLM_FILL) > 2000 and pixels_of(png, SEARCH_FILL) > 2000


def test_page_switches_workflows(server):
    with headless() as page:
        page.open(server.url + "/")
        page.evaluate(READY)
        page.evaluate("document.querySelector('#tabs button[data-workflow=\"irg\"]').click()")
        drawn = page.evaluate(when("#graph", "el.dataset.workflow === 'irg' && el.innerHTML"))
    assert "irg: optimized" in drawn and 'data-node="search.commit"' in drawn
