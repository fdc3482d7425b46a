"""What a bench run reports: ratios, SLO throughput and the CSV (`results`), rich tables
(`report`, `steps_table`, `online_ablation`), plots, the repeats' medians and spread (`repeats`)
and why a target was missed (`reasons`)."""
