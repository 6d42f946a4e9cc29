"""`rafka-actors bench`: workloads driven by real clients (and a direct protocol load
generator) against any broker, and a mode that starts rafka-actors and its peers and prints
one table of figures and ratios from one run. See docs/performance.md."""
