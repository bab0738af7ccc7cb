"""The load workloads' clients (`server_load`, `depthwise_load`): one connection per client thread, one text a request,
over OIP's REST route or its gRPC transport.

Each client's `infer(text)` returns the request's outcome, one of `OUTCOMES`: `ANSWERED` (HTTP 200 / gRPC OK),
`REFUSED` (the server replied without an answer: 503 / UNAVAILABLE when its queue is full, 500 / INTERNAL on an
error) or `LOST` (no reply: the connection failed, e.g. the server's process died mid-request). A lost request is
returned, never raised, so that a load loop counts it (`Tally`: answered + refused + lost == requests) instead of
losing the client thread or the future that sent it. Both keep one connection open across requests, as a client of a
server does: the gRPC row of a concurrency measures the same server, batcher and model as the REST row, with the
HTTP/JSON hop replaced by HTTP/2 and protobuf (`official_albert.serving.oip_grpc_messages`, no generated code).
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any, Callable, Dict, List, Optional

ANSWERED, REFUSED, LOST = "answered", "refused", "lost"
OUTCOMES = (ANSWERED, REFUSED, LOST)
# gRPC reports a failed connection with the codes a server also sends (UNAVAILABLE, INTERNAL, UNKNOWN); the details
# that only the transport writes tell the two apart.
_TRANSPORT_DETAILS = ("failed to connect", "socket closed", "connection reset", "broken pipe", "stream removed",
                      "rst_stream", "connection refused", "endpoint closing")


class Tally:
  """A load level's requests by outcome, and the answered ones' latencies (seconds), from any number of threads."""

  def __init__(self):
    self.lock = threading.Lock()
    self.counts: Dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    self.latencies: List[float] = []

  def add(self, outcome: str, latency: Optional[float] = None) -> int:
    """Counts one request; returns the answered count so far (the soak reads the server's RSS at one of them)."""
    with self.lock:
      self.counts[outcome] += 1
      if outcome == ANSWERED and latency is not None:
        self.latencies.append(latency)
      return self.counts[ANSWERED]

  def row(self) -> Dict[str, Any]:
    """{"requests": every request sent, "answered", "refused", "lost"}: the first is the sum of the other three."""
    return {"requests": sum(self.counts.values()), **self.counts}


def run_clients(client: Callable[[int], None], count: int) -> None:
  """Runs `client(i)` for i < `count` in threads and waits for them. A failed connection is a request's outcome
  (LOST, counted); anything else a client raises is raised here, not lost with its thread."""
  raised: List[BaseException] = []

  def run(index: int) -> None:
    try:
      client(index)
    except Exception as e:  # noqa: BLE001 (raised again below, in the caller's thread)
      raised.append(e)

  threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  if raised:
    raise raised[0]


class HttpClient:
  """One keep-alive connection that posts OIP infer requests of one text to model `model` on `port`."""

  def __init__(self, port: int, model: str):
    self.port, self.model, self.conn = port, model, None

  def infer(self, text: str) -> str:
    """ANSWERED (200), REFUSED (another status) or LOST (the connection failed on a reconnect too)."""
    body = json.dumps({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": [text]}]})
    for _ in range(2):  # one reconnect: a keep-alive connection the server closed
      if self.conn is None:
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
      try:
        self.conn.request("POST", f"/v2/models/{self.model}/infer", body, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        response.read()
        return ANSWERED if response.status == 200 else REFUSED
      except (OSError, http.client.HTTPException):
        self.conn.close()
        self.conn = None
    return LOST

  def close(self) -> None:
    if self.conn is not None:
      self.conn.close()


class GrpcClient:
  """One gRPC channel that sends OIP `ModelInfer` requests of one text (BYTES in `contents`) to model `model` at
  `address` ("host:port", the server's --grpc_port)."""

  def __init__(self, address: str, model: str):
    import grpc  # noqa: PLC0415 (comes with TensorFlow; imported by the workloads that use it)

    from official_albert.serving import oip_grpc_messages  # noqa: PLC0415
    self._grpc, self.model = grpc, model
    self._request = oip_grpc_messages.messages()["ModelInferRequest"]
    response = oip_grpc_messages.messages()["ModelInferResponse"]
    self.channel = grpc.insecure_channel(address)
    self._infer = self.channel.unary_unary(f"/{oip_grpc_messages.SERVICE}/ModelInfer",
                                           request_serializer=self._request.SerializeToString,
                                           response_deserializer=response.FromString)

  def infer(self, text: str) -> str:
    """ANSWERED (OK), REFUSED (a status the server sent) or LOST (the channel's own failure: see _TRANSPORT_DETAILS)."""
    request = self._request(model_name=self.model)
    request.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.append(text.encode("utf-8"))
    try:
      self._infer(request, timeout=300)
      return ANSWERED
    except self._grpc.RpcError as e:
      details = (getattr(e, "details", lambda: "")() or "").lower()  # (a call's error carries its status' details)
      return LOST if any(marker in details for marker in _TRANSPORT_DETAILS) else REFUSED

  def close(self) -> None:
    self.channel.close()
