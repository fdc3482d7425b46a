"""The simulated engine and the measured profiles and cost model it runs on."""
