"""The wire formats the server speaks, parsed and written without any web framework.

- Open Inference Protocol v2 (KServe; `inputs` of `name`, `datatype`, `shape`, `data`; text is `BYTES`, token ids
  `INT32`; the fine-tuned heads' own inputs, e.g. `question` + `context`, are `BYTES` too),
- OpenAI's `POST /v1/embeddings` (`input`: a string or a list; `encoding_format`: float or base64; `dimensions`),
  and TEI's `POST /embed` (`inputs`, `normalize`, `dimensions`),
- TF Serving's REST predict (`instances`: the row form; `inputs`: the columnar form).

Kept apart from `http_app` so that each format's rules read in one place and every refusal is an `ApiError` whose
message names the field and the fix: the app turns it into a 4xx answer `{"error": message}` (OIP's error shape,
which OpenAI-, TEI- and TF Serving-style clients also read). What an OIP tensor is apart from any refusal (the
shape and nesting of its `data`, the token-id inputs and their `IdLimits`) is `oip_tensors`'.

TEI's and Cohere's rerank shapes are `rerank_http`'s.

Long because: three wire formats, each a parser and a writer with a refusal per malformed field; split by format
they would share `ApiError`, `Limits` and `check_texts` and be read side by side anyway.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from official_albert.serving.oip_tensors import flatten
from official_albert.serving.oip_tensors import ID_INPUTS
from official_albert.serving.oip_tensors import IdLimits
from official_albert.serving.oip_tensors import INTEGER_TYPES
from official_albert.serving.oip_tensors import Limits
from official_albert.serving.oip_tensors import nested_as
from official_albert.serving.oip_tensors import nesting
from official_albert.serving.oip_tensors import shape_dims


class ApiError(Exception):
  """A refused request: `status` (4xx, or 503/504), `message` naming the field and the fix, extra `headers`."""

  def __init__(self, status: int, message: str, headers: Optional[Dict[str, str]] = None):
    super().__init__(message)
    self.status, self.message, self.headers = status, message, headers or {}


def parse_json(body: bytes) -> Dict[str, object]:
  """The request body as a JSON object, or a 400 saying what is wrong with it."""
  if not body:
    raise ApiError(400, "empty request body: send a JSON object (Content-Type: application/json).")
  try:
    data = json.loads(body)
  except (ValueError, UnicodeDecodeError) as e:
    raise ApiError(400, f"invalid JSON in the request body ({e}); send a JSON object.") from None
  except RecursionError:  # (arrays or objects nested thousands deep: the parser's stack, not a server error)
    raise ApiError(400, "invalid JSON in the request body (too deeply nested); send a JSON object whose values nest "
                   "at most a few levels, as the protocols' fields do.") from None
  if not isinstance(data, dict):
    raise ApiError(400, f"the request body is a JSON {type(data).__name__}; send a JSON object.")
  return data


def check_texts(field: str, texts: object, limits: Limits) -> List[str]:
  """`texts` as a non-empty list of strings within the limits, or a 4xx naming `field`."""
  if not isinstance(texts, list) or not texts:
    raise ApiError(400, f"{field}: expected a non-empty list of strings, got {describe(texts)}.")
  if len(texts) > limits.max_inputs:
    raise ApiError(413, f"{field}: {len(texts)} texts, more than the server's limit of {limits.max_inputs} per request "
                   "(--max_inputs); split the request.")
  for i, text in enumerate(texts):
    check_text(f"{field}[{i}]", text, limits)
  return texts


def check_text(field: str, text: object, limits: Limits) -> str:
  """`text` as a string within the limits and encodable as UTF-8, or a 4xx naming `field`.

  JSON's `\\ud800` escapes decode to a lone UTF-16 surrogate, which no tokenizer (nor the answer's UTF-8) takes: it
  is refused here, naming the text, rather than failing the model call of every request batched with it."""
  if not isinstance(text, str):
    raise ApiError(400, f"{field}: expected a string, got {describe(text)}.")
  if len(text) > limits.max_text_chars:
    raise ApiError(413, f"{field}: {len(text)} characters, more than the limit of {limits.max_text_chars} "
                   "(--max_text_chars); shorten the text (the model reads only its first tokens anyway).")
  try:
    text.encode("utf-8")
  except UnicodeEncodeError as e:
    raise ApiError(400, f"{field}: not valid Unicode text (a lone surrogate, {text[e.start]!r}, at character "
                   f"{e.start}); send UTF-8 text.") from None
  return text


def describe(value: object) -> str:
  """How a wrong value reads in a refusal: its type and its first JSON characters."""
  if isinstance(value, list) or value is None:
    return "nothing" if value is None else f"a list of {type(value[0]).__name__}" if value else "an empty list"
  try:
    shown = json.dumps(value)[:40]
  except (ValueError, RecursionError):  # (a value nested too deep to print: its type says enough)
    shown = "..."
  return f"a {type(value).__name__} ({shown})"


def _data_in_shape(field: str, tensor: Dict[str, object], shape: Sequence[int], limits: Limits) -> object:
  """OIP `data` flat: as sent when flat (the caller checks the count against the shape), else nested lists flattened
  row-major when nested exactly as `shape`; other nesting is a 400 (flattening it would move values between rows).
  Before any entry is read (a len(), not a walk): more rows than `limits.max_inputs` (413), by the shape or, where
  the shape disagrees with the data, by the data's length (more than that many rows of the shape hold)."""
  if shape[0] > limits.max_inputs:
    raise ApiError(413, f"{field}.shape: {list(shape)}: {shape[0]} rows, more than the server's limit of "
                   f"{limits.max_inputs} per request (--max_inputs); split the request.")
  data = tensor.get("data")
  if isinstance(data, list) and len(data) > max(shape[0], math.prod(shape)):
    over = len(data) > limits.max_inputs * max(1, math.prod(shape[1:]))  # (over the limit whatever shape[0] says)
    raise ApiError(413 if over else 400, f"{field}.shape: {list(shape)} holds {math.prod(shape)} values but data holds "
                   + (f"{len(data)}, more than {limits.max_inputs} rows of the shape hold (the server's limit per "
                      "request, --max_inputs); split the request." if over else
                      f"{len(data)}; send the shape of the data (row-major)."))
  if not isinstance(data, list) or not any(isinstance(x, list) for x in data):
    return data
  if not nested_as(data, shape):
    found = nesting(data, len(shape) + 1)
    how = f"as {found}" if found is not None else "unevenly (lists of different lengths or depths)"
    over = len(data) > limits.max_inputs  # (nested: an entry a row, over the limit whatever the shape says)
    raise ApiError(413 if over else 400, f"{field}.data: the shape does not match the data: shape {list(shape)}, but "
                   f"data is nested {how}{f' ({len(data)} rows, more than --max_inputs={limits.max_inputs})' * over}; "
                   "send data flat (row-major) or nested exactly as the shape.")
  return flatten(data)


# ------------------------------------------------------------------------------------- Open Inference Protocol v2
def _text_tensor_name(field: str, tensor: object, allowed: Sequence[str], seen: Dict[str, object],
                      name: Optional[str] = None, hint: str = "") -> str:
  """The name of OIP text tensor `field` (`name`, else its own "name"), checked: an object, one of `allowed`, not in
  `seen` yet, datatype BYTES (`hint` follows the datatype error's advice)."""
  if not isinstance(tensor, dict):
    raise ApiError(400, f"{field}: expected an object with name, datatype, shape and data.")
  name = tensor.get("name") if name is None else name
  if name not in allowed:
    raise ApiError(400, f"{field}.name: {name!r} is not an input of this model; its inputs are {list(allowed)}.")
  if name in seen:
    raise ApiError(400, f"{field}.name: {name!r} given twice.")
  if tensor.get("datatype") != "BYTES":
    raise ApiError(400, f"{field}.datatype: {tensor.get('datatype')!r}; {name} is text: send datatype \"BYTES\" "
                   f"with strings in data{hint}.")
  return name


def oip_inputs(body: Dict[str, object], takes_pairs: bool,
               limits: Limits) -> Tuple[List[str], Optional[List[str]], Optional[List[str]]]:
  """(texts, text pairs or None, the output names asked for or None) of an OIP infer request."""
  oip_input_names(body)  # (a non-empty list of inputs, or a 400)
  allowed = ("text", "text_pair") if takes_pairs else ("text",)
  tensors = {}
  for i, tensor in enumerate(body["inputs"]):
    field = f"inputs[{i}]"
    name = _text_tensor_name(field, tensor, allowed, tensors, hint=" (token ids go in an input named input_word_ids, "
                             "datatype INT32)")
    shape = tensor.get("shape")
    if not shape_dims(shape) or len(shape) > 2 or (len(shape) == 2 and shape[1] != 1):
      raise ApiError(400, f"{field}.shape: {shape!r}; send [n] (or [n, 1]) for n texts.")
    texts = check_texts(f"{field}.data", _data_in_shape(field, tensor, shape, limits), limits)
    if shape[0] != len(texts):
      raise ApiError(400, f"{field}.shape: {shape!r} does not match data, which holds {len(texts)} texts; "
                     f"send shape [{len(texts)}].")
    tensors[name] = texts
  if "text" not in tensors:
    raise ApiError(400, "inputs: no tensor named \"text\" (BYTES); text_pair alone is not enough.")
  pairs = tensors.get("text_pair")
  if pairs is not None and len(pairs) != len(tensors["text"]):
    raise ApiError(400, f"inputs: text_pair holds {len(pairs)} texts but text holds {len(tensors['text'])}; send one "
                   "pair per text.")
  return tensors["text"], pairs, _requested_outputs(body.get("outputs"))


def oip_input_names(body: Dict[str, object]) -> List[object]:
  """The names of an OIP infer request's input tensors (what decides how the rest is read), or a 400."""
  inputs = body.get("inputs")
  if not isinstance(inputs, list) or not inputs:
    raise ApiError(400, "inputs: expected a non-empty list of tensors, e.g. "
                   '{"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["some text"]}]}.')
  return [t.get("name") if isinstance(t, dict) else None for t in inputs]


def _integer_tensor(field: str, name: str, tensor: dict, limits: Limits, id_limits: IdLimits) -> np.ndarray:
  """One INT32 / INT64 tensor of shape [n, s] as an int64 array, or a 4xx naming the field; the shape is checked
  against the limits, and the count of `data` against the shape, before any value is read."""
  if tensor.get("datatype") not in INTEGER_TYPES:
    raise ApiError(400, f"{field}.datatype: {tensor.get('datatype')!r}; {name} holds token ids: send datatype "
                   "\"INT32\" with integers in data.")
  shape = tensor.get("shape")
  if not shape_dims(shape) or len(shape) != 2 or 0 in shape:
    raise ApiError(400, f"{field}.shape: {shape!r}; send [n, s] for n sequences of s tokens (both at least 1).")
  if shape[1] > id_limits.max_length:
    raise ApiError(400, f"{field}.shape: {shape!r}: {shape[1]} tokens per row, more than the model's "
                   f"{id_limits.max_length} positions; send at most that many (cut the rows, keeping [CLS] ... [SEP]).")
  data = _data_in_shape(field, tensor, shape, limits)
  if not isinstance(data, list):
    raise ApiError(400, f"{field}.data: expected a list of integers ({name}), got {describe(data)}.")
  if len(data) != shape[0] * shape[1]:
    raise ApiError(400, f"{field}.shape: {shape!r} holds {shape[0] * shape[1]} values but data holds {len(data)}; "
                   "send shape [n, s] with n * s values in data (row-major).")
  for k, x in enumerate(data):  # (described by the offending value: the list's first may be fine)
    if not isinstance(x, int) or isinstance(x, bool):
      raise ApiError(400, f"{field}.data[{k}]: expected an integer ({name}), got {describe(x)}; send token ids as "
                     "integers.")
  try:
    return np.asarray(data, np.int64).reshape(shape)
  except OverflowError:
    raise ApiError(400, f"{field}.data: a value does not fit in 64 bits; send token ids.") from None


def oip_token_ids(body: Dict[str, object], limits: Limits, id_limits: IdLimits
                  ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[List[str]]]:
  """(input_word_ids, input_mask, input_type_ids, the output names asked for or None) of an OIP infer request that
  sends token ids: int64 arrays [n, s]; the mask defaults to all ones, the segment ids to zeros. Each refusal is a
  400 (413 for more rows than `limits.max_inputs`) naming the field: text mixed in, a wrong datatype or shape, an id
  outside the vocabulary, rows longer than the model's positions, a mask that is not 0 / 1 or holds no token."""
  tensors: Dict[str, np.ndarray] = {}
  for i, (tensor, name) in enumerate(zip(body["inputs"], oip_input_names(body))):
    field = f"inputs[{i}]"
    if not isinstance(tensor, dict):
      raise ApiError(400, f"{field}: expected an object with name, datatype, shape and data.")
    if name not in ID_INPUTS:
      raise ApiError(400, f"{field}.name: {name!r} sent with input_word_ids; send either text (BYTES inputs) or token "
                     f"ids ({', '.join(ID_INPUTS)}; INT32), not both in one request.")
    if name in tensors:
      raise ApiError(400, f"{field}.name: {name!r} given twice.")
    tensors[name] = _integer_tensor(field, name, tensor, limits, id_limits)
  ids = tensors["input_word_ids"]
  for name in ID_INPUTS[1:]:
    if name in tensors and tensors[name].shape != ids.shape:
      raise ApiError(400, f"{name}: shape {list(tensors[name].shape)} but input_word_ids has {list(ids.shape)}; "
                     "send one value per token id.")
  outside = np.argwhere((ids < 0) | (ids >= id_limits.vocab_size))
  if len(outside):
    r, c = (int(x) for x in outside[0])
    raise ApiError(400, f"input_word_ids[{r}][{c}]: {int(ids[r, c])} is outside the vocabulary [0, "
                   f"{id_limits.vocab_size}); send ids of the model's spiece.model.")
  mask = tensors.get("input_mask", np.ones_like(ids))
  if not np.isin(mask, (0, 1)).all():
    raise ApiError(400, "input_mask: values must be 1 (a token) or 0 (padding).")
  empty = np.flatnonzero(mask.sum(-1) == 0)
  if len(empty):
    raise ApiError(400, f"input_mask[{int(empty[0])}]: all zeros; every row needs at least one token ([CLS]).")
  types = tensors.get("input_type_ids", np.zeros_like(ids))
  if ((types < 0) | (types >= id_limits.type_vocab_size)).any():
    raise ApiError(400, f"input_type_ids: values must be in [0, {id_limits.type_vocab_size}) (0: the first segment, "
                   "1: the second).")
  return ids, mask, types, _requested_outputs(body.get("outputs"))


def oip_text_tensors(body: Dict[str, object], ranks: Dict[str, int],
                     limits: Limits) -> Tuple[Dict[str, list], Optional[List[str]]]:
  """({name: texts}, the output names asked for or None) of an OIP request whose inputs are all the BYTES tensors
  `ranks` names (a fine-tuned head's: question + context, ...): rank 1 → a list of n strings (shape [n] or [n, 1]),
  rank 2 → n lists of k strings (shape [n, k]). Every input is required, and all hold the same n."""
  tensors: Dict[str, list] = {}
  for i, (tensor, name) in enumerate(zip(body["inputs"], oip_input_names(body))):
    field = f"inputs[{i}]"
    _text_tensor_name(field, tensor, list(ranks), tensors, name)
    shape, rank = tensor.get("shape"), ranks[name]
    if not shape_dims(shape) or not (len(shape) == rank or (rank == 1 and len(shape) == 2 and shape[1] == 1)):
      want = "[n] (or [n, 1]) for n texts" if rank == 1 else "[n, k] for k texts in each of n rows"
      raise ApiError(400, f"{field}.shape: {shape!r}; send {want} (non-negative integers).")
    texts = check_texts(f"{field}.data", _data_in_shape(field, tensor, shape, limits), Limits(
        limits.max_inputs * (shape[1] if rank == 2 else 1), limits.max_text_chars))
    width = shape[1] if rank == 2 else 1
    if shape[0] * width != len(texts):
      raise ApiError(400, f"{field}.shape: {shape!r} does not match data, which holds {len(texts)} texts; send "
                     f"a shape whose product is {len(texts)}.")
    tensors[name] = texts if rank == 1 else [texts[r * width:(r + 1) * width] for r in range(shape[0])]
  missing = [name for name in ranks if name not in tensors]
  if missing:
    raise ApiError(400, f"inputs: missing {missing}; this model takes {list(ranks)} (BYTES), one of each per row.")
  counts = {name: len(values) for name, values in tensors.items()}
  if len(set(counts.values())) != 1:
    raise ApiError(400, f"inputs: different numbers of rows {counts}; send one of each input per row.")
  return tensors, _requested_outputs(body.get("outputs"))


def oip_int_parameter(body: Dict[str, object], name: str, low: int, high: int) -> Optional[int]:
  """OIP's request-level `parameters.<name>` as an int in [low, high], None when absent, or a 400 naming it."""
  parameters = body.get("parameters")
  if parameters is not None and not isinstance(parameters, dict):
    raise ApiError(400, f"parameters: expected an object of named values, got {describe(parameters)}.")
  value = (parameters or {}).get(name)
  if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
    raise ApiError(400, f"parameters.{name}: expected an integer from {low} to {high}, got {describe(value)}.")
  return value


def _requested_outputs(outputs: object) -> Optional[List[str]]:
  """The output names an OIP request asks for; None (every output) when `outputs` is absent or empty, as the OIP spec,
  KServe, Triton and this server's gRPC route (whose repeated field cannot tell empty from absent) read it."""
  if outputs is None or outputs == []:
    return None
  if not isinstance(outputs, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str) for o in outputs):
    raise ApiError(400, 'outputs: expected a list of {"name": ...} objects (or leave it out for every output).')
  names, seen = [o["name"] for o in outputs], set()
  twice = next((n for n in names if n in seen or seen.add(n)), None)  # (each entry is a copy of an output)
  if twice is not None:
    raise ApiError(400, f"outputs: {twice!r} given twice; ask for each output once.")
  return names


_DATATYPES = {"f": "FP32", "i": "INT64", "u": "INT64", "O": "BYTES", "U": "BYTES"}


def oip_response(model_name: str, outputs: Dict[str, np.ndarray], requested: Optional[Sequence[str]],
                 request_id: Optional[object]) -> Dict[str, object]:
  """The OIP infer answer: one tensor per output (numbers flattened row-major, as OIP's `data`)."""
  names = list(outputs) if requested is None else list(requested)
  if len(names) > len(outputs):
    raise ApiError(400, f"outputs: {len(names)} entries, but {model_name} has {len(outputs)}: {list(outputs)}.")
  unknown = [n for n in names if n not in outputs]
  if unknown:
    raise ApiError(400, f"outputs: {unknown} are not outputs of {model_name}; its outputs are {list(outputs)}.")
  tensors = []
  for name in names:
    value = outputs[name]
    datatype = _DATATYPES[value.dtype.kind]
    data = [str(v) for v in value.reshape(-1)] if datatype == "BYTES" else value.reshape(-1).tolist()
    tensors.append({"name": name, "datatype": datatype, "shape": list(value.shape), "data": data})
  answer = {"model_name": model_name, "model_version": "1", "outputs": tensors}
  if request_id is not None:
    try:  # (echoed as sent: a lone surrogate in it could not be written as UTF-8)
      json.dumps(request_id, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
      raise ApiError(400, "id: not valid Unicode text (a lone surrogate); send UTF-8 text.") from None
    answer["id"] = request_id
  return answer


# ------------------------------------------------------------------------------------------------ OpenAI embeddings
def model_name(body: Dict[str, object]) -> Optional[str]:
  """The optional `model` of a request body: a name, or None (absent or null: the route's one model of its kind)."""
  model = body.get("model")
  if model is not None and not isinstance(model, str):
    raise ApiError(400, f"model: expected a model name (string), got {describe(model)}.")
  return model


def openai_embedding_request(body: Dict[str, object], limits: Limits) -> Tuple[Optional[str], List[str], bool, str]:
  """(model name or None, texts, whether `input` was one string, encoding_format) of `POST /v1/embeddings`."""
  model = model_name(body)
  raw = body.get("input")
  if raw is None:
    raise ApiError(400, 'input: missing; send a string or a list of strings, e.g. {"model": "...", "input": ["a"]}.')
  if isinstance(raw, list) and raw and all(isinstance(x, (int, list)) for x in raw):
    raise ApiError(400, "input: token arrays are not served (they are another tokenizer's ids: OpenAI's tiktoken); "
                        "send the texts as strings. LangChain's OpenAIEmbeddings sends token arrays unless built with "
                        "check_embedding_ctx_length=False.")
  single = isinstance(raw, str)
  texts = check_texts("input", [raw] if single else raw, limits)
  for i, text in enumerate(texts):  # (OpenAI's API refuses an empty input; so do the clients that mirror it)
    if not text:
      raise ApiError(400, f"input{'' if single else f'[{i}]'}: an empty string; OpenAI's embeddings API takes no "
                     "empty input; leave it out of the request.")
  encoding = "float" if body.get("encoding_format") is None else body["encoding_format"]  # (null: absent)
  if encoding not in ("float", "base64"):
    raise ApiError(400, f"encoding_format: {encoding!r}; send \"float\" or \"base64\".")
  return model, texts, single, encoding


def openai_dimensions(body: Dict[str, object]) -> Optional[int]:
  """OpenAI's optional `dimensions` of `POST /v1/embeddings` (a Matryoshka width), None when absent."""
  dimensions = body.get("dimensions")
  if dimensions is None:
    return None
  if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
    raise ApiError(400, f"dimensions: expected a positive integer (a width the model was trained at), got "
                        f"{describe(dimensions)}.")
  return dimensions


def openai_embedding_response(model_name: str, vectors: np.ndarray, encoding: str, tokens: int) -> Dict[str, object]:
  """OpenAI's embeddings answer; base64 is the little-endian float32 bytes of each vector (as OpenAI encodes it)."""
  data = []
  for i, vector in enumerate(np.asarray(vectors, np.float32)):
    value = (base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii") if encoding == "base64"
             else vector.tolist())
    data.append({"object": "embedding", "index": i, "embedding": value})
  return {"object": "list", "data": data, "model": model_name,
          "usage": {"prompt_tokens": int(tokens), "total_tokens": int(tokens)}}


# TEI's `POST /embed` fields this server takes (`model`, ours: which encoder, where several are served).
TEI_EMBED_FIELDS = ("inputs", "normalize", "truncate", "truncation_direction", "dimensions", "model")


def tei_embed_request(body: Dict[str, object], limits: Limits) -> Tuple[Optional[str], List[str], bool, Optional[int]]:
  """(model name or None, texts, normalize, dimensions) of TEI's `POST /embed`: `inputs` a string or a list,
  `normalize` (default true, as TEI's), `dimensions` as OpenAI's. Each text is cut at the model's length, at the
  end: `truncate` true (or absent) and `truncation_direction` "right" are served, anything else is refused."""
  unknown = sorted(str(k) for k in body if k not in TEI_EMBED_FIELDS)
  if unknown:
    raise ApiError(400, f"{unknown[0]}: not a field of /embed (or one this server does not offer); its fields are "
                        f"{list(TEI_EMBED_FIELDS)}.")
  truncate = body.get("truncate")
  if truncate is not None and not isinstance(truncate, bool):  # (the string "false", or 0, was served as true)
    raise ApiError(400, f"truncate: expected true or false (a JSON boolean), got {describe(truncate)}.")
  if truncate is False or str(body.get("truncation_direction", "right")).lower() != "right":
    raise ApiError(400, "truncate / truncation_direction: this server cuts each text at the model's length, at the "
                        "end; leave them out, or send truncate=true and truncation_direction=\"right\".")
  model = model_name(body)
  raw = body.get("inputs")
  if raw is None:
    raise ApiError(400, 'inputs: missing; send a string or a list of strings, e.g. {"inputs": ["a"]}.')
  normalize = True if body.get("normalize") is None else body["normalize"]
  if not isinstance(normalize, bool):
    raise ApiError(400, f"normalize: expected true or false (a JSON boolean), got {describe(normalize)}.")
  texts = check_texts("inputs", [raw] if isinstance(raw, str) else raw, limits)
  return model, texts, normalize, openai_dimensions(body)


# -------------------------------------------------------------------------------------------- TF Serving REST
_PAIR_NAMES = ("text_pair", "text_b")  # ours, and the SavedModel signature's name of the second segment
TFS_DEFAULT_SIGNATURE = "serving_default"
_SIGNATURE_INPUTS = {"serve_text": ["text"], "embed": ["text"], "serve_text_pair": ["text", "text_b"]}


def tfs_request(body: Dict[str, object], takes_pairs: bool, limits: Limits,
                signatures: Sequence[str] = (TFS_DEFAULT_SIGNATURE,)) -> Tuple[List[str], Optional[List[str]], bool]:
  """(texts, pairs or None, row form) of TF Serving's `:predict` body: `instances` (rows) or `inputs` (columns).

  `signature_name`, when given, must be one of `signatures` (the model's; TF Serving refuses an unknown one rather
  than answering from another), and the request must send its inputs: a second segment under serve_text / embed, or
  none under serve_text_pair, is a 400 naming them (answered, it would be another signature's answer)."""
  signature = body.get("signature_name")
  if signature is not None and signature not in signatures:
    shown = repr(signature) if isinstance(signature, str) else describe(signature)
    raise ApiError(400, f"signature_name: {shown} is not a signature of this model; its signatures are "
                   f"{list(signatures)} (or leave signature_name out).")
  if ("instances" in body) == ("inputs" in body):
    raise ApiError(400, 'send exactly one of "instances" (a list of rows) and "inputs" (columns), as TF Serving takes.')
  row_form = "instances" in body
  if row_form:
    rows = body["instances"]
    if not isinstance(rows, list) or not rows:
      raise ApiError(400, "instances: expected a non-empty list of texts or of {\"text\": ...} objects.")
    for i, row in enumerate(rows):
      _tfs_known_inputs(f"instances[{i}]", row, takes_pairs)
    if all(isinstance(r, dict) for r in rows):
      texts = check_texts("instances[].text", [r.get("text") for r in rows], limits)
      pair_name = next((n for n in _PAIR_NAMES if any(n in r for r in rows)), None)
      pairs = None if pair_name is None else check_texts(f"instances[].{pair_name}", [r.get(pair_name) for r in rows],
                                                          limits)
    else:
      texts, pairs, pair_name = check_texts("instances", rows, limits), None, None
  else:
    columns = body["inputs"]
    if isinstance(columns, dict):
      _tfs_known_inputs("inputs", columns, takes_pairs)
      texts = check_texts("inputs.text", columns.get("text"), limits)
      pair_name = next((n for n in _PAIR_NAMES if n in columns), None)
      pairs = None if pair_name is None else check_texts(f"inputs.{pair_name}", columns[pair_name], limits)
    else:
      texts, pairs, pair_name = check_texts("inputs", columns, limits), None, None
  takes = _SIGNATURE_INPUTS.get(signature)
  if takes is not None and (pairs is not None) != ("text_b" in takes):
    fix = ("send the texts alone, or serve_text_pair (or no signature_name) for pairs" if pairs is not None else
           "send text_b (or text_pair) with every text, or serve_text for single texts")
    field = f"{'instances[]' if row_form else 'inputs'}.{pair_name}:" if pairs is not None else "text_b: missing;"
    raise ApiError(400, f"{field} signature_name {signature!r} takes the inputs {takes} per row; {fix}.")
  if pairs is not None and not takes_pairs:
    raise ApiError(400, "text_pair: this model embeds single texts; send text only.")
  if pairs is not None and len(pairs) != len(texts):
    raise ApiError(400, f"text_pair: {len(pairs)} pairs for {len(texts)} texts; send one per text.")
  return texts, pairs, row_form


def _tfs_known_inputs(where: str, named: object, takes_pairs: bool) -> None:
  """Refuses an input name of `named` (a row object, or the columnar `inputs` object) that the model does not take, as
  TF Serving refuses it: a second segment sent as, say, "sentence2" would otherwise be dropped and the text answered
  alone; and one naming the second segment twice (text_pair and text_b)."""
  if not isinstance(named, dict):
    return
  if all(n in named for n in _PAIR_NAMES):
    raise ApiError(400, f"{where}: both text_pair and text_b; they name the same second segment: send one.")
  unknown = sorted(k for k in named if k not in ("text",) + _PAIR_NAMES)
  if unknown:
    inputs = "text, text_pair (or text_b)" if takes_pairs else "text"
    raise ApiError(400, f"{where}.{unknown[0]}: not an input of this model; its inputs are {inputs}.")


def tfs_response(outputs: Dict[str, np.ndarray], row_form: bool) -> Dict[str, object]:
  """TF Serving's answer: `predictions` (one entry per row: the value when the model has one output, else an object
  of outputs) for the row form; `outputs` (the value, or an object of columns) for the columnar form."""
  columns = {name: [str(v) for v in value] if value.dtype.kind in "OU" else value.tolist()
             for name, value in outputs.items()}
  if not row_form:
    return {"outputs": next(iter(columns.values())) if len(columns) == 1 else columns}
  if len(columns) == 1:
    return {"predictions": next(iter(columns.values()))}
  n = len(next(iter(columns.values())))
  return {"predictions": [{name: column[i] for name, column in columns.items()} for i in range(n)]}
