"""`ragraph serve`: workflows over HTTP, every client's requests in one wavefront scheduler.

    app.py            the Starlette app, its startup/shutdown, the API key, uvicorn
    hub.py            the one scheduler run; a Ticket per request (its events, its outcome)
    state.py          what routes share; waiting for a ticket within the timeout, or a disconnect
    openai_routes.py  /v1/chat/completions, /v1/completions, /v1/models
    run_routes.py     /runs/stream, /runs/wait (LangGraph's run API)
    info_routes.py    /ok, /health, /readiness, /metrics, /workflows, the page and its feed
    bodies.py         request bodies and the errors that name their field
    admission.py      the bounded queue (429 + Retry-After)
    answer.py         which generation's text is the answer, as deltas
    metrics.py        Prometheus;  live.py  the page's feed;  page/  the page
"""

from ragraph.serve.app import build_app, run_server
from ragraph.serve.settings import ServeSettings

__all__ = ["ServeSettings", "build_app", "run_server"]
