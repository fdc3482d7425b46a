"""The public Python API: `load` a workflow, open a `Runtime`, ask it questions.

    wf = ragraph.load("workflows/hyde.rag")
    with ragraph.Runtime(engine="sim") as rt:
        print(rt.run(wf, "Who designed the Eiffel Tower?").answer)

    load.py     a workflow ready to run (a .rag file or a builder graph, compiled)
    runtime.py  Runtime: run, batch, stream and their async twins, over one shared scheduler
    session.py  what the Runtime runs on its own loop: the engines, the hub, a call's tickets
    loop.py     the private event loop on its own thread
    answer.py   Answer, Timings (and the hub's Usage)
    events.py   what a stream yields: Token, NodeCompleted, Speculation, Finished
    options.py  keyword options checked against RuntimeConfig's fields
"""

from ragraph.api.answer import Answer, Timings
from ragraph.api.events import Event, Finished, NodeCompleted, Speculation, Token
from ragraph.api.load import load
from ragraph.api.runtime import Runtime
from ragraph.runtime.hub import Usage

__all__ = ["Answer", "Event", "Finished", "NodeCompleted", "Runtime", "Speculation", "Timings",
           "Token", "Usage", "load"]
