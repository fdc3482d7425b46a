"""`ragraph bench`: side-by-side latency and throughput of the three executors on a scaled index.

Modules, bottom up: `machine` (what ran it), `arrivals` (offline and Poisson workloads),
`synthetic` (padding vectors), `realbase` and `index` (the cached benchmark index), `questions`,
`config` (the typed settings and the --quick preset), `cells` (one workload on every executor),
`results` (ratios, SLO throughput, CSV), `report` (rich tables) and `plots` (matplotlib).
"""
