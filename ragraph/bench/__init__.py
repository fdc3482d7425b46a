"""`ragraph bench`: side-by-side latency and throughput of the executors on a scaled index.

Five families, the parts first:

- `data`: the benchmark index (real passages and synthetic padding, cached), its questions and
  the traffic that picks them.
- `measure`: what a run's work is and the least time it could take (`bounds`), the engines'
  own rates measured alone (`probe`, `search_probe`), the machine, and `ragraph calibrate`.
- `server`: llama.cpp's `llama-server`, built here, its own counters and the LangGraph app's
  calls replayed to it alone.
- `run`: the settings and presets, one cell on every executor (`cells`), a whole session and
  its driver; the `--target` load generator and the `--ray` scale-out sweep.
- `output`: tables, the CSV and JSON, plots, the repeats' medians and the reasons a target
  was missed.

`output` reads the `CellResult`s of `run.cells`; `run.driver`, the top, writes through `output`.
"""
