"""Prometheus metrics on a registry of the app's own (so tests can start several apps in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.in_flight = 0  # requests between arrival and answer: EdgeMiddleware counts them, on the event loop only
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "capsnet_requests_total", "HTTP requests by endpoint and status", ["endpoint", "method", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "capsnet_request_seconds", "HTTP request latency", ["endpoint"], buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.batch_size = Histogram(
            "capsnet_batch_size", "images per onnxruntime call", buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=self.registry
        )
        self.queue_seconds = Histogram(
            "capsnet_queue_seconds", "time a request waited for the model", buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.queue_depth = Gauge("capsnet_queue_images", "images waiting for the model", registry=self.registry)
        Gauge("capsnet_requests_in_flight", "requests being served", registry=self.registry).set_function(lambda: self.in_flight)

    def observe_batch(self, size: int, waits: list[float]) -> None:
        self.batch_size.observe(size)
        for w in waits:
            self.queue_seconds.observe(w)
