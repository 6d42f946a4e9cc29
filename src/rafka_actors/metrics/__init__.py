"""The Prometheus endpoint (`metrics.listen`): what the broker counts, and what it reads at
scrape time.

- instruments.py: the counters and histograms the request path and the actors bump, and the
  label policy (allow/deny patterns and a cap) that keeps their cardinality bounded;
- collector.py: the gauges, computed only when Prometheus scrapes: lag in records and in
  seconds, group state, members, generation, the live Burrow status, connections;
- lag.py: the pure arithmetic of lag, shared with the Spark pipeline;
- endpoint.py: the HTTP listener on the broker's event loop.

Exposition is prometheus-client's (text or OpenMetrics, as the scraper asks).
"""
