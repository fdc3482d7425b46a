"""`ragraph serve`: workflows over HTTP, every client's requests in one wavefront scheduler.

    app.py            the Starlette app, its startup and shutdown
    listener.py       uvicorn: the header deadline, the connection limit, shutdown's signal
    guards.py         before the routes: the response count, the Host allow-list, the API key
    (runtime/hub.py   the one scheduler run, restarted if it dies; a Ticket per request)
    state.py          what routes share; waiting for a ticket within the timeout, or a disconnect
    openai_routes.py  /v1/chat/completions, /v1/completions, /v1/models
    run_routes.py     /runs/stream, /runs/wait (LangGraph's run API; run_fields.py its
                      other fields; assistant_routes.py its assistants, no threads)
    info_routes.py    /ok, /health, /readiness, /metrics, /workflows, the page and its feed
    reading.py        a body: JSON only, its size, its time, its depth, its Unicode
    bodies.py         what a body asks, and the errors that name its field (http_error.py)
    openai_fields.py  OpenAI's other fields: honoured, hints not applied, or refused
    results.py        a finished request as JSON, a failed one as the status of whose fault
    health.py         whether the engine answers (/readiness)
    admission.py      the bounded queue (429 + Retry-After)
    (runtime/answer_stream.py  which generation's text is the answer, as deltas)
    metrics.py        Prometheus;  live.py  the page's feed;  page/  the page
"""

from ragraph.serve.app import build_app
from ragraph.serve.listener import run_server
from ragraph.serve.settings import ServeSettings

__all__ = ["ServeSettings", "build_app", "run_server"]
