"""Turning the metrics on at start-up: `metrics.listen`, or OpenTelemetry's environment
(`OTEL_METRICS_EXPORTER=prometheus`, with `OTEL_EXPORTER_PROMETHEUS_HOST` / `_PORT`, as the
OpenTelemetry Prometheus exporter reads them; default localhost:9464)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

import trio

from ..actors.group_registry import GroupRegistry
from ..config import BrokerConfig, ConfigError, split_host_port
from ..refusals import CannotListen
from ..storage.data_plane import DataPlane
from ..storage.durable_log import DurableCoordinatorLog
from .collector import BrokerCollector
from .endpoint import open_metrics_listener, serve_metrics
from .instruments import BrokerMetrics, LabelPolicy

log = logging.getLogger(__name__)


def metrics_address(config: BrokerConfig, environ: Mapping[str, str]) -> tuple[str, int] | None:
    """Where to serve metrics, or None if they are off."""
    if config.metrics_listen:
        host, port = split_host_port(config.metrics_listen)
        # only an explicit host leaves loopback (":9404" is not "every interface" here)
        return ("127.0.0.1" if config.metrics_listen.startswith(":") else host), port
    exporters = {e.strip() for e in environ.get("OTEL_METRICS_EXPORTER", "").split(",")}
    for other in sorted(exporters - {"prometheus", "none", ""}):
        log.warning("OTEL_METRICS_EXPORTER=%s: not supported (prometheus or none)", other)
    if "prometheus" in exporters:
        host = environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", "localhost")
        text = environ.get("OTEL_EXPORTER_PROMETHEUS_PORT", "9464")
        if not text.isdigit():
            raise ConfigError(f"OTEL_EXPORTER_PROMETHEUS_PORT: not a port: {text!r}")
        return host, int(text)
    return None


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """The metrics settings checked and their listener bound, before the data dir is read."""

    policy: LabelPolicy
    listener: trio.SocketListener


async def bind_metrics(config: BrokerConfig) -> MetricsEndpoint | None:
    """Check the metrics settings and bind the endpoint (None: metrics are off). The broker
    binds every listener before it touches the data dir (broker.py)."""
    address = metrics_address(config, os.environ)
    if address is None:
        return None
    try:
        policy = LabelPolicy.of(
            config.metrics_group_allow,
            config.metrics_group_deny,
            config.metrics_topic_allow,
            config.metrics_topic_deny,
            config.metrics_max_partition_series,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    host, port = address
    try:
        listener = await open_metrics_listener(host, port)
    except OSError as exc:
        raise CannotListen(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
            "stop whatever listens there (ss -ltnp shows it) or choose another metrics.listen",
        ) from exc
    return MetricsEndpoint(policy, listener)


async def start_metrics(
    config: BrokerConfig,
    nursery: trio.Nursery,
    groups: GroupRegistry,
    coordinator: DurableCoordinatorLog,
    data: DataPlane,
    endpoint: MetricsEndpoint | None,
) -> BrokerMetrics | None:
    """Build the instruments, hook them to the actors and the log, and serve them on the
    endpoint `bind_metrics` bound."""
    if endpoint is None:
        return None
    metrics = BrokerMetrics(endpoint.policy)
    collector = BrokerCollector(
        metrics, groups, data, config.metrics_burrow_window, data_dir=config.data_dir
    )
    metrics.registry.register(collector)
    metrics.traffic.exists = lambda org_id, name: data.topics_for(org_id).by_name(name) is not None
    groups.on_stored = metrics.settled
    coordinator.timed = metrics.log_timed
    bound_host, bound_port = endpoint.listener.socket.getsockname()[:2]
    await nursery.start(serve_metrics, metrics, endpoint.listener)
    log.info("metrics on http://%s:%d/metrics", bound_host, bound_port)
    return metrics
