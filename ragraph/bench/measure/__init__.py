"""What a bench run's work is and the least time it could take: the engines' counters
(`llm_work`, `counting`), their own rates measured alone (`probe`, `search_probe`), the bound
(`bounds`), the machine that ran it, and `ragraph calibrate`'s GPU profile (`calibrate` on a
random-weight `llama_forward`)."""
