"""The Prometheus endpoint (`metrics.listen`): what the broker counts, and what it reads at
scrape time.

- instruments.py: the counters and histograms the request path and the actors bump, and
  prometheus-client's process, platform and GC collectors;
- labels.py: label values (snake_case, rebalance causes) and the label policy (allow/deny
  patterns and a cap) that keeps the cardinality bounded;
- traffic.py: produced and fetched bytes and records per topic, counted on the request path;
- collector.py: the gauges, computed only when Prometheus scrapes: lag in records and in
  seconds, group state, members, generation, the live Burrow status, log ends, connections,
  the data dir's free bytes;
- lag.py: the pure arithmetic of lag, shared with the Spark pipeline;
- endpoint.py: the HTTP listener on the broker's event loop.

Exposition is prometheus-client's (text or OpenMetrics, as the scraper asks).
"""
