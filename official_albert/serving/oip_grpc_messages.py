"""The Open Inference Protocol v2 gRPC messages (KServe's `inference.GRPCInferenceService`), built at run time.

The messages and field numbers are those of the OIP spec's `grpc_predict_v2.proto` (package `inference`), written
here as a `FileDescriptorProto` in Python instead of a .proto compiled by grpcio-tools: no generated code to keep in
step with the installed protobuf (TensorFlow pins protobuf 7.36; grpcio-tools wheels pin their own protobuf), no
build step, and the same wire format, so any OIP client (Triton's and KServe's Python clients, grpcurl with the
spec's .proto) talks to this server. docs/design.md, "Serving over gRPC", says why.

`messages()` gives the message classes by their proto name (`messages()["ModelInferRequest"]`); `METHODS` names the
service's RPCs with their request and response messages; `SERVICE` is the full service name gRPC routes by.
"""

from __future__ import annotations

import functools
from typing import Dict, Tuple

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory

PACKAGE = "inference"
SERVICE = f"{PACKAGE}.GRPCInferenceService"
# (rpc, request message, response message), the spec's order.
METHODS: Tuple[Tuple[str, str, str], ...] = (
    ("ServerLive", "ServerLiveRequest", "ServerLiveResponse"),
    ("ServerReady", "ServerReadyRequest", "ServerReadyResponse"),
    ("ModelReady", "ModelReadyRequest", "ModelReadyResponse"),
    ("ServerMetadata", "ServerMetadataRequest", "ServerMetadataResponse"),
    ("ModelMetadata", "ModelMetadataRequest", "ModelMetadataResponse"),
    ("ModelInfer", "ModelInferRequest", "ModelInferResponse"),
)

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"bool": _F.TYPE_BOOL, "int32": _F.TYPE_INT32, "int64": _F.TYPE_INT64, "uint32": _F.TYPE_UINT32,
            "uint64": _F.TYPE_UINT64, "float": _F.TYPE_FLOAT, "double": _F.TYPE_DOUBLE, "string": _F.TYPE_STRING,
            "bytes": _F.TYPE_BYTES}
# The spec's messages: name → fields (number, name, type, repeated?, oneof index or None). A type not in _SCALARS is a
# message (".inference.X" or a nested one); "map<string,InferParameter>" is the parameters map.
_PARAMETERS = "map<string,InferParameter>"
_TENSOR = [(1, "name", "string", False), (2, "datatype", "string", False), (3, "shape", "int64", True)]
_MESSAGES = {
    "ServerLiveRequest": [], "ServerLiveResponse": [(1, "live", "bool", False)],
    "ServerReadyRequest": [], "ServerReadyResponse": [(1, "ready", "bool", False)],
    "ModelReadyRequest": [(1, "name", "string", False), (2, "version", "string", False)],
    "ModelReadyResponse": [(1, "ready", "bool", False)],
    "ServerMetadataRequest": [],
    "ServerMetadataResponse": [(1, "name", "string", False), (2, "version", "string", False),
                               (3, "extensions", "string", True)],
    "ModelMetadataRequest": [(1, "name", "string", False), (2, "version", "string", False)],
    "ModelMetadataResponse": [(1, "name", "string", False), (2, "versions", "string", True),
                              (3, "platform", "string", False), (4, "inputs", "TensorMetadata", True),
                              (5, "outputs", "TensorMetadata", True)],
    "ModelMetadataResponse.TensorMetadata": _TENSOR,
    "ModelInferRequest": [(1, "model_name", "string", False), (2, "model_version", "string", False),
                          (3, "id", "string", False), (4, "parameters", _PARAMETERS, True),
                          (5, "inputs", "InferInputTensor", True), (6, "outputs", "InferRequestedOutputTensor", True),
                          (7, "raw_input_contents", "bytes", True)],
    "ModelInferRequest.InferInputTensor": _TENSOR + [(4, "parameters", _PARAMETERS, True),
                                                     (5, "contents", "InferTensorContents", False)],
    "ModelInferRequest.InferRequestedOutputTensor": [(1, "name", "string", False),
                                                     (2, "parameters", _PARAMETERS, True)],
    "ModelInferResponse": [(1, "model_name", "string", False), (2, "model_version", "string", False),
                           (3, "id", "string", False), (4, "parameters", _PARAMETERS, True),
                           (5, "outputs", "InferOutputTensor", True), (6, "raw_output_contents", "bytes", True)],
    "ModelInferResponse.InferOutputTensor": _TENSOR + [(4, "parameters", _PARAMETERS, True),
                                                       (5, "contents", "InferTensorContents", False)],
    # InferParameter's fields are one `oneof parameter_choice`.
    "InferParameter": [(1, "bool_param", "bool", False), (2, "int64_param", "int64", False),
                       (3, "string_param", "string", False), (4, "double_param", "double", False),
                       (5, "uint64_param", "uint64", False)],
    "InferTensorContents": [(1, "bool_contents", "bool", True), (2, "int_contents", "int32", True),
                            (3, "int64_contents", "int64", True), (4, "uint_contents", "uint32", True),
                            (5, "uint64_contents", "uint64", True), (6, "fp32_contents", "float", True),
                            (7, "fp64_contents", "double", True), (8, "bytes_contents", "bytes", True)],
}


def _add_field(message: descriptor_pb2.DescriptorProto, scope: str, number: int, name: str, kind: str,
               repeated: bool) -> None:
  field = message.field.add(name=name, number=number, json_name=_json_name(name),
                            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
  if kind in _SCALARS:
    field.type = _SCALARS[kind]
  elif kind == _PARAMETERS:  # a map is a repeated nested `ParametersEntry {key = 1; value = 2}` with map_entry set
    entry = message.nested_type.add(name="ParametersEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, json_name="key", label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
    entry.field.add(name="value", number=2, json_name="value", label=_F.LABEL_OPTIONAL, type=_F.TYPE_MESSAGE,
                    type_name=f".{PACKAGE}.InferParameter")
    field.type, field.type_name = _F.TYPE_MESSAGE, f".{scope}.ParametersEntry"
  else:  # a message: nested in this one when declared so, else top level
    nested = f"{scope}.{kind}"
    field.type = _F.TYPE_MESSAGE
    field.type_name = "." + (nested if nested.split(".", 1)[1] in _MESSAGES else f"{PACKAGE}.{kind}")


def _json_name(name: str) -> str:
  head, *rest = name.split("_")
  return head + "".join(word.capitalize() for word in rest)


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
  """The spec's `grpc_predict_v2.proto` as a FileDescriptorProto (messages and the service)."""
  proto = descriptor_pb2.FileDescriptorProto(name="official_albert/grpc_predict_v2.proto", package=PACKAGE,
                                             syntax="proto3")
  built: Dict[str, descriptor_pb2.DescriptorProto] = {}
  for full_name, fields in _MESSAGES.items():
    outer, _, inner = full_name.partition(".")
    message = built[outer].nested_type.add(name=inner) if inner else proto.message_type.add(name=outer)
    built[full_name] = message
    scope = f"{PACKAGE}.{full_name}"
    if full_name == "InferParameter":
      message.oneof_decl.add(name="parameter_choice")
    for number, name, kind, repeated in fields:
      _add_field(message, scope, number, name, kind, repeated)
      if full_name == "InferParameter":
        message.field[-1].oneof_index = 0
  service = proto.service.add(name=SERVICE.split(".")[-1])
  for rpc, request, response in METHODS:
    service.method.add(name=rpc, input_type=f".{PACKAGE}.{request}", output_type=f".{PACKAGE}.{response}")
  return proto


@functools.lru_cache(maxsize=1)
def messages() -> Dict[str, type]:
  """{proto name: message class} of every top-level message, from a pool of their own (no clash with another
  copy of the spec's file in the default pool, e.g. a generated client imported in the same process)."""
  pool = descriptor_pool.DescriptorPool()
  pool.Add(file_descriptor())
  return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
          for name in _MESSAGES if "." not in name}
