"""Adapters that put ragraph into other frameworks' apps, each behind an optional extra and
never imported by `import ragraph`:

    langchain/  a LangChain `Runnable` over a workflow and a `BaseRetriever` over an index
                (`pip install 'ragraph[langchain]'`)
"""
