"""The server's Prometheus series (`/metrics`): requests by route and status, latency, batch sizes, queue depth, the
requests in flight and those the shutdown cancelled. prometheus-client is the optional `serve` extra."""

from __future__ import annotations

from official_albert.serving.export_folder import install_hint

try:  # the `serve` extra: only the server imports this module
  import prometheus_client
except ImportError as e:
  raise ImportError(f"The server needs prometheus-client: {install_hint('serve')}. ({e})") from e


class Metrics:
  """The Prometheus series, in a registry of their own (one app per registry; tests build several)."""

  def __init__(self):
    self.registry = prometheus_client.CollectorRegistry()
    self.requests = prometheus_client.Counter("albert_requests", "HTTP requests by route and status.",
                                              ["route", "status"], registry=self.registry)
    self.latency = prometheus_client.Histogram("albert_request_latency_seconds", "Request latency by route.",
                                               ["route"], registry=self.registry,
                                               buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
    self.batch_size = prometheus_client.Histogram("albert_batch_size", "Texts per model call.", ["model"],
                                                  registry=self.registry, buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
    self.queue_depth = prometheus_client.Gauge("albert_queue_depth", "Requests waiting for the model.", ["model"],
                                               registry=self.registry)
    self.in_flight = prometheus_client.Gauge("albert_requests_in_flight", "HTTP and gRPC requests being answered "
                                             "(not the health probes, nor the /metrics scrape).",
                                             registry=self.registry)
    self.shutdown_cancels = prometheus_client.Counter("albert_shutdown_cancels", "Requests the server's shutdown "
                                                      "cancelled (answered 503).", ["route"], registry=self.registry)
