"""ragraph in LangChain and LangGraph apps (`pip install 'ragraph[langchain]'`).

    with ragraph.Runtime(engine="sim") as rt:
        chain = as_runnable("workflows/hyde.rag", rt) | RunnableLambda(str.upper)
        docs = RagraphRetriever(runtime=rt, k=4).invoke("Who designed the Eiffel Tower?")

    runnable.py   RagraphRunnable: a workflow as a Runnable (question in, answer text out)
    retriever.py  RagraphRetriever: the runtime's index as a BaseRetriever of Documents
    streaming.py  which tokens of a stream are the answer's text
"""

from ragraph.errors import ConfigError

try:
    import langchain_core  # noqa: F401
except ImportError as err:  # the extra is optional: say which one
    raise ConfigError("langchain", "ragraph.interop.langchain needs langchain-core: "
                      "pip install 'ragraph[langchain]'") from err

from ragraph.interop.langchain.retriever import RagraphRetriever, document_of  # noqa: E402
from ragraph.interop.langchain.runnable import RagraphRunnable, as_runnable  # noqa: E402

__all__ = ["RagraphRetriever", "RagraphRunnable", "as_runnable", "document_of"]
