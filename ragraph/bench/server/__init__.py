"""llama.cpp's `llama-server` in the bench: built from the installed llama-cpp-python's sources
(`llama_server`; `python -m ragraph.bench.server.llama_server build`), its own counters of a
run's work (`stats`), and the LangGraph app's calls replayed straight to it (`alone`)."""
