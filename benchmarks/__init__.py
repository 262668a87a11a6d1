"""Quality-and-speed runs too long for the tests; results are recorded in benchmarks/results/."""
