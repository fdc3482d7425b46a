"""`ragraph tune`: the measured Pareto front of answer quality against speed for a workflow.

    space.py    the knobs searched: those that change answers and those that change only speed
    measure.py  one point measured: quality as `ragraph eval` scores it, speed as the bench's
                offline protocol runs it
    results.py  every measured point in a JSON-lines file, read back to resume
    search.py   the search: every quality setting, then the speed settings of the undominated
    front.py    dominance, the fronts, the recommendation and the exactness check
    report.py   the table, the plot and the tuned configuration file
"""
