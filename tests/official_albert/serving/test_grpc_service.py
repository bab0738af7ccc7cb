"""serving.grpc_service without a model: the gRPC messages read into REST's OIP body and written back (contents and
raw, exactly), and a port that is taken stops start-up naming --grpc_port. The served answers are checked against
REST and the pipelines by test_grpc_server.py."""

import asyncio
import concurrent.futures
import re
import socket
import struct
import warnings

import pytest

grpc = pytest.importorskip("grpc")

from official_albert.serving import grpc_service  # noqa: E402
from official_albert.serving import oip_grpc_messages  # noqa: E402
from official_albert.serving.http_protocols import ApiError  # noqa: E402

M = oip_grpc_messages.messages()


def test_the_spec_messages_round_trip_on_the_wire():
  """Field numbers as the spec's grpc_predict_v2.proto: a hand-encoded ModelInferRequest reads back."""
  # model_name (1) = "m"; inputs (5) = {name (1) = "t", datatype (2) = "BYTES", shape (3) = [1],
  # contents (5) = {bytes_contents (8) = "a"}}; raw_input_contents (7) absent.
  tensor = b"\x0a\x01t" + b"\x12\x05BYTES" + b"\x1a\x01\x01" + b"\x2a\x03\x42\x01a"
  wire = b"\x0a\x01m" + b"\x2a" + bytes([len(tensor)]) + tensor
  request = M["ModelInferRequest"].FromString(wire)
  assert request.model_name == "m" and request.inputs[0].name == "t" and list(request.inputs[0].shape) == [1]
  assert list(request.inputs[0].contents.bytes_contents) == [b"a"]
  assert request.SerializeToString() == wire
  assert [m.name for m in M["ModelInferResponse"].DESCRIPTOR.fields] == [
      "model_name", "model_version", "id", "parameters", "outputs", "raw_output_contents"]


def test_request_body_reads_contents_raw_and_parameters():
  request = M["ModelInferRequest"](model_name="m", id="7")
  text = request.inputs.add(name="text", datatype="BYTES", shape=[2])
  text.contents.bytes_contents.extend(["é".encode(), b"b"])
  ids = request.inputs.add(name="input_word_ids", datatype="INT64", shape=[1, 2])
  ids.contents.int64_contents.extend([2, 3])
  request.outputs.add(name="label")
  request.parameters["top_k"].int64_param = 3
  assert grpc_service.request_body(request) == {
      "inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["é", "b"]},
                 {"name": "input_word_ids", "datatype": "INT64", "shape": [1, 2], "data": [2, 3]}],
      "outputs": [{"name": "label"}], "id": "7", "parameters": {"top_k": 3}}
  raw = M["ModelInferRequest"](model_name="m")
  raw.inputs.add(name="text", datatype="BYTES", shape=[2])
  raw.inputs.add(name="input_word_ids", datatype="INT32", shape=[1, 2])
  raw.raw_input_contents.extend([struct.pack("<I", 2) + "é".encode() + struct.pack("<I", 0),
                                 struct.pack("<2i", 2, 3)])
  body = grpc_service.request_body(raw)
  assert [t["data"] for t in body["inputs"]] == [["é", ""], [2, 3]]
  with pytest.raises(ApiError, match="raw_input_contents: 1 entries for 2 inputs"):
    del raw.raw_input_contents[1]
    grpc_service.request_body(raw)


def test_response_message_writes_contents_or_raw():
  answer = {"model_name": "m", "model_version": "1", "id": "x", "outputs": [
      {"name": "label", "datatype": "BYTES", "shape": [2], "data": ["é", "b"]},
      {"name": "probabilities", "datatype": "FP32", "shape": [2, 1], "data": [0.25, 0.5]},
      {"name": "label_id", "datatype": "INT64", "shape": [2], "data": [1, 0]}]}
  message = grpc_service.response_message(answer, raw=False)
  assert (message.model_name, message.id, [list(o.shape) for o in message.outputs]) == ("m", "x", [[2], [2, 1], [2]])
  assert list(message.outputs[0].contents.bytes_contents) == ["é".encode(), b"b"]
  assert list(message.outputs[1].contents.fp32_contents) == [0.25, 0.5]
  assert list(message.outputs[2].contents.int64_contents) == [1, 0]
  raw = grpc_service.response_message(answer, raw=True)
  assert list(raw.raw_output_contents) == [struct.pack("<I", 2) + "é".encode() + struct.pack("<I", 1) + b"b",
                                           struct.pack("<2f", 0.25, 0.5), struct.pack("<2q", 1, 0)]
  assert not raw.outputs[0].HasField("contents")


def test_a_taken_port_stops_start_up_naming_it():
  with socket.socket() as taken:
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    address = f"127.0.0.1:{taken.getsockname()[1]}"

    async def start():
      calls = grpc_service.OipCalls(None, None, None, None)
      await grpc_service.start_server(calls, address, 1 << 20)

    with pytest.raises(OSError, match=f"--grpc_port: cannot listen on {address}"):
      asyncio.run(start())


def test_request_body_refuses_more_values_than_the_limit_before_decoding_them():
  """Audit s29 safety 3: a raw BYTES tensor of 4-byte zero lengths was walked element by element (80 s for 293 MB),
  and raw INT32 turned into a Python list, before any limit was checked. A shape declaring more than `max_values`,
  or contents holding more, is a 413 before the values are decoded."""
  declared = M["ModelInferRequest"](model_name="m")
  declared.inputs.add(name="text", datatype="BYTES", shape=[10**9])
  declared.raw_input_contents.append(b"\x09\x00\x00\x00ab")  # (malformed: decoded, it would be a 400 of its own)
  with pytest.raises(ApiError, match=r"inputs\[0\].shape: \[1000000000\] holds 1000000000 values, more than the "
                     "limit of 64") as e:
    grpc_service.request_body(declared, max_values=64)
  assert e.value.status == 413
  for datatype, raw, where in (("BYTES", struct.pack("<I", 0) * 10_000, "raw_input_contents of inputs[0]"),
                               ("INT32", struct.pack("<i", 2) * 10_000, "raw_input_contents of inputs[0]"),
                               ("INT32", None, "inputs[0].contents.int_contents")):
    request = M["ModelInferRequest"](model_name="m")
    tensor = request.inputs.add(name="text", datatype=datatype, shape=[1])
    if raw is None:
      tensor.contents.int_contents.extend([2] * 10_000)
    else:
      request.raw_input_contents.append(raw)
    with pytest.raises(ApiError, match=re.escape(f"{where}: more than 64 values, the limit")) as e:
      grpc_service.request_body(request, max_values=64)
    assert e.value.status == 413
    assert len(grpc_service.request_body(request)["inputs"][0]["data"]) == 10_000  # (no limit given: all read)


def test_an_output_asked_for_twice_or_too_many_values_are_invalid_argument_over_grpc():
  """Audit s29 safety 1 and 3 over the served gRPC route (the HTTP app in process, its gRPC server on a free port):
  `outputs` naming one output twice, and a raw BYTES tensor of more elements than the model's inputs may hold, are
  INVALID_ARGUMENT naming the field, as REST answers them 400 / 413."""
  pytest.importorskip("fastapi")
  pytest.importorskip("prometheus_client")
  pytest.importorskip("httpx")
  with warnings.catch_warnings():  # (as test_http_app: Starlette's test client warns about httpx)
    warnings.simplefilter("ignore")
    from fastapi import testclient  # noqa: PLC0415
  from official_albert.serving import http_app  # noqa: PLC0415
  from tests.official_albert.serving.test_http_app import StandIn  # noqa: PLC0415

  class Classifier(StandIn):
    def inputs_metadata(self):  # (gRPC's ModelInfer reads the model's metadata first: NOT_FOUND, as REST's route)
      return [{"name": "text", "datatype": "BYTES", "shape": [-1]}]

  with socket.socket() as free:
    free.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{free.getsockname()[1]}"
  app = http_app.create_app({"m": Classifier()}, http_app.Settings(max_batch_size=4), http_app.ServerState(),
                            grpc_address=address)
  twice = M["ModelInferRequest"](model_name="m")
  twice.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x")
  for name in ("label", "label_id", "label"):
    twice.outputs.add(name=name)
  many = M["ModelInferRequest"](model_name="m")
  many.inputs.add(name="text", datatype="BYTES", shape=[1])
  many.raw_input_contents.append(struct.pack("<I", 0) * 100_000)
  with testclient.TestClient(app), grpc.insecure_channel(address) as channel:
    infer = channel.unary_unary(f"/{oip_grpc_messages.SERVICE}/ModelInfer",
                                request_serializer=M["ModelInferRequest"].SerializeToString,
                                response_deserializer=M["ModelInferResponse"].FromString)
    for request, words in ((twice, "outputs: 'label' given twice"),
                           (many, "raw_input_contents of inputs[0]: more than 256 values")):
      with pytest.raises(grpc.RpcError) as e:
        infer(request, timeout=30)
      assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in e.value.details(), e.value.details()
    twice.ClearField("outputs")
    assert [o.name for o in infer(twice, timeout=30).outputs] == ["label", "label_id", "probabilities"]


def test_large_messages_are_decoded_at_most_settings_large_bodies_at_once(monkeypatch):
  """Review s49: REST reads and parses at most Settings.large_bodies large bodies at once; gRPC decoded every large
  ModelInfer message at once (each builds its strings anew). Each decode waits (at most a second) for one more than
  the bound to start; none may, and every call is still answered."""
  pytest.importorskip("fastapi")
  pytest.importorskip("prometheus_client")
  pytest.importorskip("httpx")
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi import testclient  # noqa: PLC0415
  from official_albert.serving import http_app  # noqa: PLC0415
  from tests.official_albert.serving.test_http_app import counted_at_once  # noqa: PLC0415
  from tests.official_albert.serving.test_http_app import StandIn  # noqa: PLC0415

  class Classifier(StandIn):
    def inputs_metadata(self):
      return [{"name": "text", "datatype": "BYTES", "shape": [-1]}]

  counted_decode, most = counted_at_once(grpc_service.request_body, bound=2)
  monkeypatch.setattr(grpc_service, "request_body", counted_decode)
  with socket.socket() as free:
    free.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{free.getsockname()[1]}"
  app = http_app.create_app({"m": Classifier()}, http_app.Settings(max_batch_size=4, large_bodies=2,
                                                                   max_text_chars=3 << 20),
                            http_app.ServerState(), grpc_address=address)
  large = M["ModelInferRequest"](model_name="m")
  large.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x" * (2 << 20))
  with testclient.TestClient(app), grpc.insecure_channel(address) as channel, \
      concurrent.futures.ThreadPoolExecutor(4) as pool:
    infer = channel.unary_unary(f"/{oip_grpc_messages.SERVICE}/ModelInfer",
                                request_serializer=M["ModelInferRequest"].SerializeToString,
                                response_deserializer=M["ModelInferResponse"].FromString)
    answers = list(pool.map(lambda _: infer(large, timeout=60), range(4)))
  assert [[o.name for o in a.outputs][:1] for a in answers] == [["label"]] * 4
  assert 1 <= most[0] <= 2, f"{most[0]} large messages decoded at once (Settings.large_bodies=2)"
