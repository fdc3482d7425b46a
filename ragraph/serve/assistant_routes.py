"""The part of LangGraph's assistants and threads API a client of the run API needs: each
workflow is an assistant (its id and graph id are the workflow's name), listed by `POST
/assistants/search` and read by `GET /assistants/{id}`, so `client.assistants.search()` finds
them. Threads hold state between runs, which ragraph's stateless runs do not keep: every
`/threads` route answers 404 saying so (use `thread_id=None`)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ragraph.serve.http_error import HttpError
from ragraph.serve.state import ServerState

# Assistants are the server's workflows, fixed when it starts: one time stamp for all.
EPOCH = "1970-01-01T00:00:00+00:00"


def routes() -> list[Route]:
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    return [Route("/assistants/search", search, methods=["POST"]),
            Route("/assistants/{assistant_id}", assistant, methods=["GET"]),
            Route("/threads", threads, methods=methods),
            Route("/threads/{rest:path}", threads, methods=methods)]


async def search(request: Request) -> Response:
    state: ServerState = request.app.state.server
    names = sorted(state.catalog.workflows)
    return JSONResponse([_assistant(name) for name in names])


async def assistant(request: Request) -> Response:
    state: ServerState = request.app.state.server
    name = request.path_params["assistant_id"]
    if name not in state.catalog.workflows:
        raise HttpError(404, f"assistant_id: no workflow named {name[:100]!r} (this server has "
                        f"{', '.join(sorted(state.catalog.workflows))})", "assistant_id")
    return JSONResponse(_assistant(name))


async def threads(request: Request) -> Response:
    raise HttpError(404, "threads are not supported: ragraph serve runs are stateless (no "
                    "state is kept between runs); run with thread_id=None (POST /runs/wait, "
                    "/runs/stream)", "thread_id")


def _assistant(name: str) -> dict[str, Any]:
    return {"assistant_id": name, "graph_id": name, "name": name, "description": None,
            "config": {}, "context": {}, "metadata": {"source": "ragraph"}, "version": 1,
            "created_at": EPOCH, "updated_at": EPOCH}
