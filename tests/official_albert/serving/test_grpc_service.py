"""serving.grpc_service without a model: the gRPC messages read into REST's OIP body and written back (contents and
raw, exactly), and a port that is taken stops start-up naming --grpc_port. The served answers are checked against
REST and the pipelines by test_grpc_server.py."""

import asyncio
import socket
import struct

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
