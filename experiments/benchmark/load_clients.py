"""The load workloads' clients (`server_load`, `depthwise_load`): one connection per client thread, one text a request,
over OIP's REST route or its gRPC transport.

Each client's `infer(text)` returns whether the request was answered (HTTP 200 / gRPC OK); a refusal (503 /
UNAVAILABLE) or an error counts as not answered. Both keep one connection open across requests, as a client of a
server does: the gRPC row of a concurrency measures the same server, batcher and model as the REST row, with the
HTTP/JSON hop replaced by HTTP/2 and protobuf (`official_albert.serving.oip_grpc_messages`, no generated code).
"""

from __future__ import annotations

import http.client
import json


class HttpClient:
  """One keep-alive connection that posts OIP infer requests of one text to model `model` on `port`."""

  def __init__(self, port: int, model: str):
    self.port, self.model, self.conn = port, model, None

  def infer(self, text: str) -> bool:
    body = json.dumps({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": [text]}]})
    for attempt in range(2):  # one reconnect: a keep-alive connection the server closed
      if self.conn is None:
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
      try:
        self.conn.request("POST", f"/v2/models/{self.model}/infer", body, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        response.read()
        return response.status == 200
      except (OSError, http.client.HTTPException):
        self.conn.close()
        self.conn = None
        if attempt:
          raise
    return False

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

  def infer(self, text: str) -> bool:
    request = self._request(model_name=self.model)
    request.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.append(text.encode("utf-8"))
    try:
      self._infer(request, timeout=300)
      return True
    except self._grpc.RpcError:
      return False

  def close(self) -> None:
    self.channel.close()
