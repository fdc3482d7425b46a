"""Running a bench: the settings and presets (`config`, `presets`, `ablation`), the workloads in
time (`arrivals`), one cell on every executor (`cells`), a whole session priced by its bounds
(`session`, `work`) and its driver; `ragraph bench --target` (`target`, `http_load`) and
`--ray` (`scale`)."""
