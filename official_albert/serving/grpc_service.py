"""The Open Inference Protocol v2 over gRPC (`inference.GRPCInferenceService`): the server's `--grpc_port`.

Every RPC is answered by the same calls as the REST routes (serving.http_app hands them over as `OipCalls`): a
`ModelInferRequest` is read into the JSON body OIP's REST route takes (`request_body`), answered by the same
model resolution, dynamic batcher and `oip_response`, and the answer written back as a `ModelInferResponse`
(`response_message`). A gRPC answer is therefore the REST answer on the same inputs, field by field.

Tensors: text is `BYTES` (UTF-8 strings in `contents.bytes_contents`, or in `raw_input_contents` as the spec lays
bytes out: each element a 4-byte little-endian length, then its bytes), token ids `INT32` / `INT64`
(`int_contents` / `int64_contents`, or raw little-endian). A request that sends `raw_input_contents` gets its outputs
in `raw_output_contents` (as Triton answers); otherwise in each output's `contents`.

Errors are gRPC status codes with the REST answer's message: 400 / 413 → INVALID_ARGUMENT, 404 → NOT_FOUND,
503 (a full queue; the server draining after SIGTERM) → UNAVAILABLE, 504 → DEADLINE_EXCEEDED, anything else
INTERNAL. While draining, ServerReady and ModelReady answer `ready: false` and inference is refused UNAVAILABLE;
requests already received count in the server's in-flight total, which the drain waits for, and (all but the
health RPCs, as the HTTP probes) in the `albert_requests_in_flight` gauge.

The service is registered with `grpc.method_handlers_generic_handler` on a `grpc.aio` server that runs in the HTTP
server's event loop (the batchers' queues belong to that loop), with the messages of serving.oip_grpc_messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import math
import socket
import struct
import time
from typing import Awaitable, Callable, Dict, List, Optional

import grpc
import numpy as np

from official_albert.serving import oip_grpc_messages
from official_albert.serving import server_shutdown
from official_albert.serving.http_protocols import ApiError

_CODES = {400: grpc.StatusCode.INVALID_ARGUMENT, 413: grpc.StatusCode.INVALID_ARGUMENT,
          404: grpc.StatusCode.NOT_FOUND, 503: grpc.StatusCode.UNAVAILABLE, 504: grpc.StatusCode.DEADLINE_EXCEEDED}
# The `contents` field of each datatype, and its little-endian layout in raw contents (BYTES: length-prefixed).
_CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
             "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
             "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
             "FP64": "fp64_contents", "BYTES": "bytes_contents"}
_RAW = {"BOOL": "<?", "INT8": "<i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8", "UINT8": "<u1",
        "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8", "FP32": "<f4", "FP64": "<f8"}
# RPCs answered while the server drains (the probes must see it not ready).
_HEALTH = ("ServerLive", "ServerReady", "ModelReady")


@dataclasses.dataclass
class OipCalls:
  """What the REST routes answer with, shared by the gRPC service (built by serving.http_app).

  infer: (model name, OIP JSON body) → the OIP JSON answer; raises ApiError. model_metadata: name → the metadata
  dict (ApiError 404 for an unknown model). server_metadata: () → {name, version, extensions}. state: the server's
  ServerState (ready, draining, in_flight). observe: (rpc, status code name, seconds) → None (metrics; seconds None
  for a call refused while draining, or cancelled by its client: counted, kept out of the latency, whose quantiles
  0-second refusals would pull down just as a drain is watched). in_flight:
  (+1 / -1) → None, a call starting / ending (the requests-in-flight gauge; the health RPCs are left out).
  max_values: model name → the most values one input tensor of it may hold (`request_body` decodes no more), or None.
  decode_slot: a ModelInfer message's size in bytes → waits for a slot to decode it in, and returns the slot's
  release (None: no slot needed): REST's bound on large bodies read and parsed at once (http_app's
  `Settings.large_bodies`), so that decoding large messages (each builds its strings anew) holds no more memory at
  once over gRPC than over REST. Raises ApiError 503 when no slot frees in time.
  """
  infer: Callable[[str, Dict[str, object]], Awaitable[Dict[str, object]]]
  model_metadata: Callable[[str], Dict[str, object]]
  server_metadata: Callable[[], Dict[str, object]]
  state: object
  observe: Callable[[str, str, Optional[float]], None] = lambda rpc, code, seconds: None
  in_flight: Callable[[int], None] = lambda delta: None
  max_values: Callable[[str], Optional[int]] = lambda name: None
  decode_slot: Callable[[int], Awaitable[Optional[Callable[[], None]]]] = None

  def __post_init__(self):
    if self.decode_slot is None:
      self.decode_slot = _no_slot


async def _no_slot(size: int) -> None:
  return None


# ------------------------------------------------------------------------------------------------- tensors
def _decode_bytes(field: str, values: List[bytes]) -> List[str]:
  try:
    return [v.decode("utf-8") for v in values]
  except UnicodeDecodeError as e:
    raise ApiError(400, f"{field}: not UTF-8 text ({e}); send text as UTF-8 bytes.") from None


def _too_many(field: str, most: int) -> ApiError:
  return ApiError(413, f"{field}: more than {most} values, the limit of one input of this model (--max_inputs rows); "
                  "split the request.")


def _raw_bytes(field: str, raw: bytes, most: int) -> List[bytes]:
  """The elements of a raw BYTES tensor: each a 4-byte little-endian length, then that many bytes (at most `most`:
  more is a 413, refused before the rest is walked)."""
  values, at = [], 0
  while at < len(raw):
    if len(values) == most:
      raise _too_many(field, most)
    if at + 4 > len(raw):
      raise ApiError(400, f"{field}: {len(raw) - at} bytes left where a 4-byte length was expected; BYTES raw "
                     "contents are, per element, a little-endian uint32 length then the bytes.")
    (length,) = struct.unpack_from("<I", raw, at)
    if at + 4 + length > len(raw):
      raise ApiError(400, f"{field}: an element of {length} bytes runs past the end ({len(raw) - at - 4} left).")
    values.append(raw[at + 4:at + 4 + length])
    at += 4 + length
  return values


def _tensor_data(field: str, tensor, raw: Optional[bytes], most: int) -> list:
  """The values of one input tensor as a flat list (strings for BYTES), from `raw` when given, else `contents`; more
  than `most` values is a 413, refused before they are decoded."""
  datatype = tensor.datatype
  if raw is not None:
    if datatype == "BYTES":
      return _decode_bytes(f"{field} (raw_input_contents)", _raw_bytes(f"raw_input_contents of {field}", raw, most))
    if datatype not in _RAW:
      return []  # (the datatype is refused by the body's checks, naming the input)
    size = np.dtype(_RAW[datatype]).itemsize
    if len(raw) % size:
      raise ApiError(400, f"raw_input_contents of {field}: {len(raw)} bytes is not a whole number of {datatype} "
                     f"values ({size} bytes each).")
    if len(raw) // size > most:
      raise _too_many(f"raw_input_contents of {field}", most)
    return np.frombuffer(raw, _RAW[datatype]).tolist()
  name = _CONTENTS.get(datatype)
  if name and len(getattr(tensor.contents, name)) > most:
    raise _too_many(f"{field}.contents.{name}", most)
  values = list(getattr(tensor.contents, name)) if name else []
  if not values:  # values sent in another datatype's field: say which, rather than "empty"
    others = [f for f in set(_CONTENTS.values()) if len(getattr(tensor.contents, f))]
    if others:
      raise ApiError(400, f"{field}.contents: datatype {datatype!r} but the values are in {sorted(others)}; "
                     f"send {datatype} values in {name or 'the field of their datatype'} (text: BYTES in "
                     "bytes_contents; token ids: INT32 in int_contents).")
  return _decode_bytes(f"{field}.contents.bytes_contents", values) if datatype == "BYTES" else values


def _parameter(value) -> object:
  choice = value.WhichOneof("parameter_choice")
  return None if choice is None else getattr(value, choice)


def request_body(request, max_values: Optional[int] = None) -> Dict[str, object]:
  """A `ModelInferRequest` as the JSON body of OIP's REST infer route (inputs with flat `data`, outputs, id,
  parameters), so that one parser checks both transports. An input of more than `max_values` values (declared in
  its shape, or sent) is a 413 before its values are decoded: the REST parser's limits, checked before the work."""
  most = max_values or math.inf
  raw = list(request.raw_input_contents)
  if raw and len(raw) != len(request.inputs):
    raise ApiError(400, f"raw_input_contents: {len(raw)} entries for {len(request.inputs)} inputs; send one per "
                   "input, in the order of inputs (or send every input in its contents).")
  inputs = []
  for i, tensor in enumerate(request.inputs):
    field = f"inputs[{i}]"
    shape = [int(d) for d in tensor.shape]
    if math.prod(max(d, 0) for d in shape) > most:  # (a negative dimension: the REST parser's 400 names it)
      raise ApiError(413, f"{field}.shape: {shape} holds {math.prod(shape)} values, more than the limit of {most} for "
                     "one input of this model (--max_inputs rows); split the request.")
    inputs.append({"name": tensor.name, "datatype": tensor.datatype, "shape": shape,
                   "data": _tensor_data(field, tensor, raw[i] if raw else None, most)})
  body: Dict[str, object] = {"inputs": inputs}
  if request.outputs:
    body["outputs"] = [{"name": o.name} for o in request.outputs]
  if request.id:
    body["id"] = request.id
  if request.parameters:
    body["parameters"] = {key: _parameter(value) for key, value in request.parameters.items()}
  return body


def _raw_output(datatype: str, data: list) -> bytes:
  if datatype == "BYTES":
    return b"".join(struct.pack("<I", len(b)) + b for b in (s.encode("utf-8") for s in data))
  return np.asarray(data, _RAW[datatype]).tobytes()


def response_message(answer: Dict[str, object], raw: bool):
  """The OIP JSON answer as a `ModelInferResponse` (outputs in `raw_output_contents` when `raw`)."""
  message = oip_grpc_messages.messages()["ModelInferResponse"](
      model_name=answer["model_name"], model_version=answer["model_version"], id=str(answer.get("id") or ""))
  for tensor in answer["outputs"]:
    out = message.outputs.add(name=tensor["name"], datatype=tensor["datatype"], shape=tensor["shape"])
    if raw:
      message.raw_output_contents.append(_raw_output(tensor["datatype"], tensor["data"]))
    elif tensor["datatype"] == "BYTES":
      out.contents.bytes_contents.extend(s.encode("utf-8") for s in tensor["data"])
    else:
      getattr(out.contents, _CONTENTS[tensor["datatype"]]).extend(tensor["data"])
  return message


# ------------------------------------------------------------------------------------------------- service
def _status_of(e: Exception):
  if isinstance(e, ApiError):
    return _CODES.get(e.status, grpc.StatusCode.INTERNAL), e.message
  return grpc.StatusCode.INTERNAL, f"internal error: {type(e).__name__}: {e}"


# Long because: the six RPCs are small closures over the same calls and state, and the wrapper that counts, drains
# and maps errors is shared by all of them.
def handlers(calls: OipCalls) -> grpc.GenericRpcHandler:
  """The service's RPCs as one generic handler (no generated stubs)."""
  messages = oip_grpc_messages.messages()
  state = calls.state

  def ready() -> bool:
    return bool(state.ready and not state.draining)

  def check_version(version: str, name: str) -> None:
    if version not in ("", "1"):
      raise ApiError(404, f"model {name!r} version {version!r}: this server serves version \"1\" only (or leave "
                     "the version empty).")

  async def server_live(request, context):
    return messages["ServerLiveResponse"](live=True)

  async def server_ready(request, context):
    return messages["ServerReadyResponse"](ready=ready())

  async def model_ready(request, context):
    calls.model_metadata(request.name)  # NOT_FOUND for an unknown model
    check_version(request.version, request.name)
    return messages["ModelReadyResponse"](ready=ready())

  async def server_metadata(request, context):
    return messages["ServerMetadataResponse"](**calls.server_metadata())

  async def model_metadata(request, context):
    check_version(request.version, request.name)
    meta = calls.model_metadata(request.name)
    return messages["ModelMetadataResponse"](name=meta["name"], versions=meta["versions"], platform=meta["platform"],
                                             inputs=meta["inputs"], outputs=meta["outputs"])

  async def model_infer(request, context):
    if not request.model_name:
      raise ApiError(400, "model_name: missing; name the model to run (ModelMetadata lists its inputs).")
    check_version(request.model_version, request.model_name)
    calls.model_metadata(request.model_name)  # NOT_FOUND before the body is read, as the REST route
    # In a thread, as REST parses a large body (decoding up to the limits never holds up the event loop), under a
    # slot for a large message: freed when the decode ends, not when a cancelled call stops waiting for it.
    release = await calls.decode_slot(request.ByteSize())
    decode = asyncio.get_running_loop().run_in_executor(None, request_body, request,
                                                        calls.max_values(request.model_name))
    if release is not None:
      decode.add_done_callback(lambda _: release())
    body = await asyncio.shield(decode)
    answer = await calls.infer(request.model_name, body)
    return response_message(answer, raw=bool(request.raw_input_contents))

  def wrap(rpc: str, answer):
    async def handler(request, context):
      started, code, cut = time.monotonic(), grpc.StatusCode.OK, False
      if state.draining and rpc not in _HEALTH:
        code = grpc.StatusCode.UNAVAILABLE
        calls.observe(rpc, code.name, None)  # counted, no latency: a refusal is no answer (as REST's drain refusals)
        await context.abort(code, "the server is shutting down; retry on another replica.")
      state.in_flight += 1
      gauged = rpc not in _HEALTH  # (the probes stay out of the gauge, as the HTTP ones)
      if gauged:
        calls.in_flight(1)
      try:
        return await answer(request, context)
      except asyncio.CancelledError:  # the client cancelled (or its deadline passed): no answer, not "OK"
        code = grpc.StatusCode.CANCELLED
        cut = server_shutdown.closing(state)  # the server's stop cut it: its client reads UNAVAILABLE
        if cut:
          code = grpc.StatusCode.UNAVAILABLE
          logging.warning("gRPC %s: cancelled by the server's shutdown before its answer (still in flight when the "
                          "drain ended); counted as status UNAVAILABLE.", rpc)
        raise
      except Exception as e:  # an ApiError, or a bug: one status with a message, and the server stays up
        code, message = _status_of(e)
        if code == grpc.StatusCode.INTERNAL:
          logging.exception("gRPC %s failed", rpc)
        await context.abort(code, message)
      finally:
        state.in_flight -= 1
        if gauged:
          calls.in_flight(-1)
        # (a cancelled call untimed: the client's time, not the answer's, as REST's 499)
        calls.observe(rpc, code.name, None if cut or code == grpc.StatusCode.CANCELLED else time.monotonic() - started)
    return handler

  answers = {"ServerLive": server_live, "ServerReady": server_ready, "ModelReady": model_ready,
             "ServerMetadata": server_metadata, "ModelMetadata": model_metadata, "ModelInfer": model_infer}
  return grpc.method_handlers_generic_handler(oip_grpc_messages.SERVICE, {
      rpc: grpc.unary_unary_rpc_method_handler(wrap(rpc, answers[rpc]),
                                               request_deserializer=messages[request].FromString,
                                               response_serializer=messages[response].SerializeToString)
      for rpc, request, response in oip_grpc_messages.METHODS})


async def start_server(calls: OipCalls, address: str, max_message_bytes: int) -> grpc.aio.Server:
  """A started `grpc.aio` server on `address` ("host:port") in the running event loop.

  Raises:
    OSError: the address cannot be bound (the message names it, --grpc_port, and why: `bind_failure`).
  """
  # (so_reuseport off: gRPC turns it on by default on Linux, where a second server on the same port would then start
  # and share the connections silently instead of failing to bind.)
  server = grpc.aio.server(options=[("grpc.max_receive_message_length", max_message_bytes),
                                    ("grpc.max_send_message_length", -1), ("grpc.so_reuseport", 0)])
  server.add_generic_rpc_handlers((handlers(calls),))
  try:
    port = server.add_insecure_port(address)
  except RuntimeError as e:
    raise OSError(f"--grpc_port: cannot listen on {address} ({e}); {bind_failure(address)}") from None
  if address.endswith(":0"):  # (port 0: the system's choice, which only the bind knows)
    logging.warning("gRPC: listening on port %d (--grpc_port=0).", port)
  await server.start()
  return server


def bind_failure(address: str) -> str:
  """Why "host:port" (an IPv6 host in brackets) cannot be bound, and what to do — found by binding it once more
  (gRPC's error says only "failed to bind"): "pick a free port" only when the port is in use."""
  host, _, port = address.rpartition(":")
  if ":" in host and not (host.startswith("[") and host.endswith("]")):
    return f"an IPv6 address goes in brackets: [{host}]:{port}."
  host = host.strip("[]")
  try:
    found = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
  except (socket.gaierror, ValueError) as e:
    return f"--host={host} is not an address here ({e}); give one of this machine's (127.0.0.1, ::1, 0.0.0.0, ::)."
  for family, kind, proto, _, sockaddr in found:
    with socket.socket(family, kind, proto) as probe:
      probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (as gRPC binds: a closed port is free)
      try:
        probe.bind(sockaddr)
      except OSError as e:
        if e.errno == errno.EADDRINUSE:
          return f"port {port} is in use; pick a free port."
        return f"--host={host} cannot be bound ({e.strerror}); give one of this machine's addresses."
  return "check --host and --grpc_port (the address binds now: another process may have released it)."
