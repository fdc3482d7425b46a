"""The stepwise IVF search engine on faiss, its cost model and request locality."""
