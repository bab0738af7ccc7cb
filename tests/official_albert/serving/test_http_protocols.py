"""The server's parts without a server: the wire formats (serving.http_protocols) and the dynamic batcher
(serving.batching) with a stand-in model, so their rules are checked in milliseconds."""

import asyncio
import base64
import re
import threading

import numpy as np
import pytest

from official_albert.serving import batching
from official_albert.serving import http_protocols as protocols
from official_albert.serving import rerank_http

LIMITS = protocols.Limits(max_inputs=4, max_text_chars=20)


def _tensor(name="text", data=("a",), datatype="BYTES", shape=None):
  return {"name": name, "datatype": datatype, "shape": [len(data)] if shape is None else shape, "data": list(data)}


def test_oip_inputs_read_text_pairs_and_nested_rows():
  body = {"inputs": [_tensor(data=["a", "b"]), _tensor("text_pair", ["c", "d"])], "outputs": [{"name": "label"}]}
  assert protocols.oip_inputs(body, True, LIMITS) == (["a", "b"], ["c", "d"], ["label"])
  nested = {"inputs": [_tensor(data=[["a"], ["b"]], shape=[2, 1])]}
  assert protocols.oip_inputs(nested, False, LIMITS) == (["a", "b"], None, None)


@pytest.mark.parametrize("body, status, words", [
    ({}, 400, "inputs: expected a non-empty list"),
    ({"inputs": [_tensor(datatype="INT32", data=[1])]}, 400, "inputs[0].datatype"),
    ({"inputs": [_tensor(data=["a"], shape=[2])]}, 400, "does not match data"),
    ({"inputs": [_tensor(data=["a"], shape=[1, 2])]}, 400, "inputs[0].shape"),
    ({"inputs": [_tensor("text_pair")]}, 400, "not an input of this model"),
    ({"inputs": [_tensor(data=["a"] * 5)]}, 413, "limit of 4"),
    ({"inputs": [_tensor(data=["x" * 21])]}, 413, "21 characters"),
    ({"inputs": [_tensor(), _tensor()]}, 400, "given twice"),
])
def test_oip_refusals_name_the_field(body, status, words):
  with pytest.raises(protocols.ApiError) as e:
    protocols.oip_inputs(body, False, LIMITS)
  assert e.value.status == status and words in e.value.message


def test_oip_pairs_must_match_texts_and_json_must_be_an_object():
  with pytest.raises(protocols.ApiError, match="one pair per text"):
    protocols.oip_inputs({"inputs": [_tensor(data=["a", "b"]), _tensor("text_pair", ["c"])]}, True, LIMITS)
  for body, words in ((b"", "empty request body"), (b"{", "invalid JSON"), (b"[1]", "JSON list")):
    with pytest.raises(protocols.ApiError, match=words):
      protocols.parse_json(body)


def test_oip_response_flattens_row_major_with_datatypes():
  outputs = {"label": np.asarray(["x", "y"], object), "label_id": np.asarray([1, 0], np.int64),
             "probabilities": np.asarray([[0.25, 0.75], [0.5, 0.5]], np.float32)}
  answer = protocols.oip_response("m", outputs, None, "req-1")
  tensors = {t["name"]: t for t in answer["outputs"]}
  assert answer["id"] == "req-1" and tensors["label"] == {"name": "label", "datatype": "BYTES", "shape": [2],
                                                          "data": ["x", "y"]}
  assert tensors["probabilities"]["shape"] == [2, 2] and tensors["probabilities"]["data"] == [0.25, 0.75, 0.5, 0.5]
  assert tensors["label_id"]["datatype"] == "INT64"
  with pytest.raises(protocols.ApiError, match="not outputs of m"):
    protocols.oip_response("m", outputs, ["logits"], None)


def test_openai_embeddings_request_and_base64_answer():
  assert protocols.openai_embedding_request({"model": "e", "input": "hi"}, LIMITS) == ("e", ["hi"], True, "float")
  assert protocols.openai_dimensions({"input": "hi"}) is None and protocols.openai_dimensions({"dimensions": 16}) == 16
  for bad in ("16", 0, -4, True, 1.5):
    with pytest.raises(protocols.ApiError, match="dimensions: expected a positive integer"):
      protocols.openai_dimensions({"dimensions": bad})
  with pytest.raises(protocols.ApiError, match="token arrays.*check_embedding_ctx_length=False"):
    protocols.openai_embedding_request({"input": [[1, 2]]}, LIMITS)
  for body, field in (({"input": ""}, "input:"), ({"input": ["a", ""]}, "input[1]:")):  # (OpenAI refuses them)
    with pytest.raises(protocols.ApiError, match=re.escape(field) + " an empty string") as e:
      protocols.openai_embedding_request(body, LIMITS)
    assert e.value.status == 400
  vectors = np.asarray([[1.5, -2.0]], np.float32)
  answer = protocols.openai_embedding_response("e", vectors, "base64", 7)
  decoded = np.frombuffer(base64.b64decode(answer["data"][0]["embedding"]), "<f4")
  assert decoded.tolist() == [1.5, -2.0] and answer["usage"] == {"prompt_tokens": 7, "total_tokens": 7}


def test_rerank_orders_best_first_ties_in_request_order():
  assert rerank_http.rerank_response([0.2, 0.9, 0.2], ["a", "b", "c"], True) == [
      {"index": 1, "score": 0.9, "text": "b"}, {"index": 0, "score": 0.2, "text": "a"},
      {"index": 2, "score": 0.2, "text": "c"}]


def test_tf_serving_row_and_columnar_forms():
  assert protocols.tfs_request({"instances": ["a", "b"]}, False, LIMITS) == (["a", "b"], None, True)
  assert protocols.tfs_request({"instances": [{"text": "a", "text_b": "b"}]}, True, LIMITS) == (["a"], ["b"], True)
  assert protocols.tfs_request({"inputs": {"text": ["a"], "text_pair": ["b"]}}, True, LIMITS) == (["a"], ["b"], False)
  with pytest.raises(protocols.ApiError, match="exactly one of"):
    protocols.tfs_request({"instances": ["a"], "inputs": ["a"]}, False, LIMITS)
  outputs = {"label": np.asarray(["x", "y"], object), "score": np.asarray([0.5, 0.25], np.float32)}
  assert protocols.tfs_response(outputs, True) == {"predictions": [{"label": "x", "score": 0.5},
                                                                   {"label": "y", "score": 0.25}]}
  assert protocols.tfs_response({"e": np.zeros((1, 2), np.float32)}, False) == {"outputs": [[0.0, 0.0]]}


# ------------------------------------------------------------------------------------------------------ batcher
class FakeModel:
  """Answers each text with its own length (so rows can be traced) and records every call's texts and pairs."""

  def __init__(self, gate=None):
    self.calls, self.gate, self.entered, self.counted = [], gate, threading.Event(), []

  def predict(self, texts, pairs=None):
    self.entered.set()
    if self.gate is not None:
      assert self.gate.wait(60)
    self.calls.append((list(texts), pairs))
    return {"n": np.asarray([len(t) + (100 if pairs else 0) for t in texts], np.int64),
            "v": np.asarray([[len(t), 1.0] for t in texts], np.float32)}

  def token_count(self, text, pair=None):
    self.counted.append(text)
    return len(text)


def test_batcher_groups_by_length_and_gives_each_request_its_rows():
  model = FakeModel()

  async def scenario():
    batcher = batching.Batcher(model.predict, model.token_count, max_batch_size=3, batch_timeout_s=0.5, max_queue=16)
    batcher.start()
    requests = [(["aaaa", "b"], None), (["cc"], ["p"]), (["dddddd", "ee", "f"], None)]
    answers = await asyncio.gather(*(batcher.submit(t, p, timeout_s=60) for t, p in requests))
    await batcher.stop()
    return requests, answers

  requests, answers = asyncio.run(scenario())
  for (texts, pairs), answer in zip(requests, answers):
    assert answer["n"].tolist() == [len(t) + (100 if pairs else 0) for t in texts]
    assert answer["v"].shape == (len(texts), 2) and answer["v"].dtype == np.float32
  for texts, pairs in model.calls:  # at most 3 texts a call; pairs never mixed with single texts
    assert len(texts) <= 3 and (pairs is None or len(pairs) == len(texts))
  assert sorted(len(t) for texts, _ in model.calls for t in texts) == [1, 1, 2, 2, 4, 6]


def test_batcher_counts_tokens_only_to_cut_a_window_into_batches():
  """A lone request (the idle server's case) runs without its texts being tokenized for the batcher; a window of more
  rows than max_batch_size is sorted by token count, so each batch holds texts of similar length."""
  gate = threading.Event()
  model = FakeModel(gate)

  async def scenario():
    batcher = batching.Batcher(model.predict, model.token_count, max_batch_size=3, batch_timeout_s=0.5, max_queue=16)
    batcher.start()
    gate.set()
    lone = await batcher.submit(["ccc", "a"], None, timeout_s=60)
    assert lone["n"].tolist() == [3, 1] and model.counted == []
    gate.clear()
    model.entered.clear()
    held = asyncio.ensure_future(batcher.submit(["x"], None, timeout_s=60))
    for _ in range(1200):  # bounded (60 s): until the worker holds the first request in the model
      if model.entered.wait(0) and batcher.depth() == 0:
        break
      await asyncio.sleep(0.05)
    waiting = [asyncio.ensure_future(batcher.submit(texts, None, timeout_s=60))
               for texts in (["dddddd", "bb"], ["eeeee", "a", "ccc"])]
    for _ in range(1200):  # both queued behind it: they form the next window (5 rows > 3)
      if batcher.depth() == 2:
        break
      await asyncio.sleep(0.05)
    gate.set()
    answers = await asyncio.gather(held, *waiting)
    await batcher.stop()
    return answers

  held, first, second = asyncio.run(scenario())
  assert held["n"].tolist() == [1] and first["n"].tolist() == [6, 2] and second["n"].tolist() == [5, 1, 3]
  assert sorted(model.counted) == sorted(["dddddd", "bb", "eeeee", "a", "ccc"])  # the cut window's rows only
  assert [texts for texts, _ in model.calls[-2:]] == [["a", "bb", "ccc"], ["eeeee", "dddddd"]]


def test_batcher_cuts_calls_at_the_token_budget():
  """With max_batch_tokens, no model call pads more tokens than the budget (its rows × its longest row's tokens; a
  longer row runs alone), a lone request's rows are cut too, and every request gets its own rows."""
  model = FakeModel()

  async def scenario(requests):
    batcher = batching.Batcher(model.predict, model.token_count, max_batch_size=8, batch_timeout_s=0.5,
                               max_queue=16, max_batch_tokens=8)
    batcher.start()
    answers = await asyncio.gather(*(batcher.submit(t, None, timeout_s=60) for t in requests))
    await batcher.stop()
    return answers

  requests = [["aaaa", "b", "cc"], ["dddddddddd"], ["e", "ff", "g", "hhh"]]
  for texts, answer in zip(requests, asyncio.run(scenario(requests))):
    assert answer["n"].tolist() == [len(t) for t in texts]
  for texts, _ in model.calls:
    assert len(texts) == 1 or len(texts) * max(map(len, texts)) <= 8, texts
  assert sorted(t for texts, _ in model.calls for t in texts) == sorted(sum(requests, []))
  model.calls.clear()
  (lone,) = asyncio.run(scenario([["cccc", "aaaa", "bbbb"]]))
  assert lone["n"].tolist() == [4, 4, 4] and [texts for texts, _ in model.calls] == [["cccc", "aaaa"], ["bbbb"]]


async def _until_running(model):
  for _ in range(1200):  # bounded (60 s): until the worker runs the first request
    if model.entered.is_set():
      return
    await asyncio.sleep(0.05)


def test_batcher_refuses_when_full_and_times_out():
  gate = threading.Event()
  model = FakeModel(gate)

  async def scenario():
    batcher = batching.Batcher(model.predict, model.token_count, max_batch_size=1, batch_timeout_s=0, max_queue=1)
    batcher.start()
    first = asyncio.ensure_future(batcher.submit(["a"], None, timeout_s=60))
    await _until_running(model)
    assert model.entered.is_set() and batcher.depth() == 0
    waiting = asyncio.ensure_future(batcher.submit(["b"], None, timeout_s=0.2))
    await asyncio.sleep(0)
    with pytest.raises(batching.QueueFull):
      await batcher.submit(["c"], None, timeout_s=60)
    with pytest.raises(batching.RequestTimeout):
      await waiting
    gate.set()
    assert (await first)["n"].tolist() == [1]
    await batcher.stop()

  asyncio.run(scenario())


def test_a_cancelled_submit_never_reaches_the_model():
  """A caller that gives up (a gRPC deadline or cancel, a request cut at shutdown) takes its queued rows with it: they
  were computed for nobody before, under load the work of clients that had gone."""
  gate = threading.Event()
  model = FakeModel(gate)

  async def scenario():
    batcher = batching.Batcher(model.predict, model.token_count, max_batch_size=1, batch_timeout_s=0, max_queue=4)
    batcher.start()
    first = asyncio.ensure_future(batcher.submit(["a"], None, timeout_s=60))
    await _until_running(model)
    gone = asyncio.ensure_future(batcher.submit(["gone"], None, timeout_s=60))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
      await gone
    after = asyncio.ensure_future(batcher.submit(["after"], None, timeout_s=60))
    gate.set()
    assert (await first)["n"].tolist() == [1] and (await after)["n"].tolist() == [5]
    await batcher.stop()

  asyncio.run(scenario())
  assert [texts for texts, _ in model.calls] == [["a"], ["after"]]


def test_requests_given_up_free_their_queue_places_and_cost_a_window_nothing():
  """Requests whose callers timed out neither keep live ones out of a full queue (they held their places until the
  worker passed them by) nor count against the next window's max_batch_size (it ran short or empty)."""
  gate = threading.Event()
  model = FakeModel(gate)

  async def scenario():
    batcher = batching.Batcher(model.predict, model.token_count, max_batch_size=2, batch_timeout_s=0.5, max_queue=2)
    batcher.start()
    first = asyncio.ensure_future(batcher.submit(["a"], None, timeout_s=60))
    await _until_running(model)
    with pytest.raises(batching.RequestTimeout):
      await batcher.submit(["gone"], None, timeout_s=0.05)
    assert batcher.depth() == 0
    live = [asyncio.ensure_future(batcher.submit([text], None, timeout_s=60)) for text in ("x", "yy")]
    await asyncio.sleep(0)
    assert batcher.depth() == 2 and not any(f.done() for f in live)  # (2 places: the gone request holds none)
    gate.set()
    assert (await first)["n"].tolist() == [1]
    assert [(await f)["n"].tolist() for f in live] == [[1], [2]]
    await batcher.stop()

  asyncio.run(scenario())
  assert [texts for texts, _ in model.calls] == [["a"], ["x", "yy"]]


def test_stop_answers_what_the_worker_held_and_what_was_queued():
  """Review s50: `stop` cancelled the worker and left the request of the window in flight and the queued ones to
  their timeouts (the server drains first; a library caller's stop did not)."""
  gate = threading.Event()
  model = FakeModel(gate)

  async def scenario():
    batcher = batching.Batcher(model.predict, model.token_count, max_batch_size=1, batch_timeout_s=0, max_queue=4)
    batcher.start()
    held = asyncio.ensure_future(batcher.submit(["a"], None, timeout_s=60))
    await _until_running(model)
    queued = asyncio.ensure_future(batcher.submit(["b"], None, timeout_s=60))
    await asyncio.sleep(0)
    stopping = asyncio.ensure_future(batcher.stop())
    try:  # (answered before the model call in flight ends: the gate opens after)
      return await asyncio.wait_for(asyncio.gather(held, queued, return_exceptions=True), 30)
    finally:
      gate.set()
      await stopping

  for answer in asyncio.run(scenario()):
    assert isinstance(answer, RuntimeError) and "stopped before answering" in str(answer), answer


# ------------------------------------------------------------------------------------------- token ids, task heads
ID_LIMITS = protocols.IdLimits(vocab_size=100, max_length=8, type_vocab_size=2)


def _ids(name="input_word_ids", rows=((2, 5, 3),), datatype="INT32", shape=None):
  data = [list(r) for r in rows]
  return {"name": name, "datatype": datatype, "shape": [len(data), len(data[0])] if shape is None else shape,
          "data": data}


def test_oip_token_ids_read_ids_mask_and_segments_with_defaults():
  body = {"inputs": [_ids(rows=[(2, 5, 3), (2, 7, 0)]), _ids("input_mask", [(1, 1, 1), (1, 1, 0)])]}
  ids, mask, types, requested = protocols.oip_token_ids(body, LIMITS, ID_LIMITS)
  assert ids.tolist() == [[2, 5, 3], [2, 7, 0]] and mask.tolist() == [[1, 1, 1], [1, 1, 0]]
  assert types.tolist() == [[0, 0, 0], [0, 0, 0]] and requested is None
  flat = {"inputs": [{**_ids(rows=[(2, 5), (2, 6)]), "data": [2, 5, 2, 6]}], "outputs": [{"name": "label"}]}
  ids, mask, _, requested = protocols.oip_token_ids(flat, LIMITS, ID_LIMITS)
  assert ids.tolist() == [[2, 5], [2, 6]] and mask.tolist() == [[1, 1], [1, 1]] and requested == ["label"]


@pytest.mark.parametrize("inputs, status, words", [
    ([_ids(), _tensor()], 400, "not both"),
    ([_ids(datatype="FP32")], 400, "inputs[0].datatype"),
    ([_ids(shape=[3])], 400, "inputs[0].shape"),
    ([_ids(shape=[2, 3])], 400, "the shape does not match the data: shape [2, 3], but data is nested as [1, 3]"),
    ([{**_ids(shape=[2, 3]), "data": [2, 5, 3]}], 400, "holds 6 values but data holds 3"),
    ([{**_ids(), "data": [[2, 5, "x"]]}], 400, "inputs[0].data[2]: expected an integer"),
    ([_ids(rows=[(2, 100, 3)])], 400, "input_word_ids[0][1]: 100 is outside the vocabulary [0, 100)"),
    ([_ids(rows=[(2, -1, 3)])], 400, "outside the vocabulary"),
    ([_ids(rows=[tuple(range(9))])], 400, "more than the model's 8 positions"),
    ([_ids(rows=[(2, 5, 3)] * 5)], 413, "limit of 4"),
    ([_ids(), _ids("input_mask", [(1, 1)])], 400, "input_mask: shape [1, 2]"),
    ([_ids(), _ids("input_mask", [(1, 2, 1)])], 400, "input_mask: values"),
    ([_ids(), _ids("input_mask", [(0, 0, 0)])], 400, "input_mask[0]: all zeros"),
    ([_ids(), _ids("input_type_ids", [(0, 2, 0)])], 400, "input_type_ids: values must be in [0, 2)"),
    ([_ids(), _ids()], 400, "given twice"),
])
def test_oip_token_id_refusals_name_the_field(inputs, status, words):
  with pytest.raises(protocols.ApiError) as e:
    protocols.oip_token_ids({"inputs": inputs}, LIMITS, ID_LIMITS)
  assert e.value.status == status and words in e.value.message, e.value.message


QA_INPUTS = {"question": 1, "context": 1}


def test_oip_text_tensors_read_a_heads_named_inputs():
  body = {"inputs": [_tensor("question", ["q1", "q2"]), _tensor("context", [["c1"], ["c2"]], shape=[2, 1])]}
  assert protocols.oip_text_tensors(body, QA_INPUTS, LIMITS) == ({"question": ["q1", "q2"], "context": ["c1", "c2"]},
                                                                None)
  choices = {"inputs": [_tensor("choices", ["a", "b", "c", "d"], shape=[2, 2])]}
  assert protocols.oip_text_tensors(choices, {"choices": 2}, LIMITS)[0] == {"choices": [["a", "b"], ["c", "d"]]}


@pytest.mark.parametrize("inputs, words", [
    ([_tensor("question")], "missing ['context']"),
    ([_tensor("question"), _tensor("context", ["a", "b"])], "different numbers of rows"),
    ([_tensor("text"), _tensor("context")], "'text' is not an input of this model; its inputs are ['question', "),
    ([_tensor("question", datatype="INT32"), _tensor("context")], "inputs[0].datatype"),
    ([_tensor("question", shape=[1, 2]), _tensor("context")], "inputs[0].shape"),
    ([_tensor("question", data=[3]), _tensor("context")], "expected a string"),
])
def test_oip_text_tensor_refusals_name_the_field(inputs, words):
  with pytest.raises(protocols.ApiError) as e:
    protocols.oip_text_tensors({"inputs": inputs}, QA_INPUTS, LIMITS)
  assert e.value.status == 400 and words in e.value.message, e.value.message


# ------------------------------------------------------------------------------------------- edge inputs (audit)
SURROGATE = "a\ud800b"  # what JSON's "a\ud800b" decodes to: valid JSON, not valid Unicode text


@pytest.mark.parametrize("parse, words", [
    (lambda: protocols.oip_inputs({"inputs": [_tensor(data=["ok", SURROGATE])]}, False, LIMITS), "inputs[0].data[1]"),
    (lambda: protocols.oip_inputs({"inputs": [_tensor(), _tensor("text_pair", [SURROGATE])]}, True, LIMITS),
     "inputs[1].data[0]"),
    (lambda: protocols.oip_text_tensors({"inputs": [_tensor("question"), _tensor("context", [SURROGATE])]}, QA_INPUTS,
                                        LIMITS), "inputs[1].data[0]"),
    (lambda: protocols.oip_text_tensors({"inputs": [_tensor("choices", ["a", SURROGATE], shape=[1, 2])]},
                                        {"choices": 2}, LIMITS), "inputs[0].data[1]"),
    (lambda: protocols.openai_embedding_request({"input": SURROGATE}, LIMITS), "input[0]"),
    (lambda: protocols.openai_embedding_request({"input": ["a", SURROGATE]}, LIMITS), "input[1]"),
    (lambda: rerank_http.rerank_request({"query": SURROGATE, "texts": ["a"]}, LIMITS), "query:"),
    (lambda: rerank_http.rerank_request({"query": "q", "texts": ["a", SURROGATE]}, LIMITS), "texts[1]"),
    (lambda: protocols.tfs_request({"instances": [SURROGATE]}, False, LIMITS), "instances[0]"),
    (lambda: protocols.tfs_request({"instances": [{"text": "a", "text_b": SURROGATE}]}, True, LIMITS),
     "instances[].text_b[0]"),
    (lambda: protocols.tfs_request({"inputs": {"text": [SURROGATE]}}, False, LIMITS), "inputs.text[0]"),
    (lambda: protocols.oip_response("m", {}, None, SURROGATE), "id:"),
])
def test_a_lone_surrogate_is_refused_naming_the_text(parse, words):
  """A text the tokenizer cannot take is a 400 naming it at the protocol layer, never a failed model call."""
  with pytest.raises(protocols.ApiError) as e:
    parse()
  assert e.value.status == 400 and words in e.value.message and "not valid Unicode text" in e.value.message, (
      e.value.message)


class FailingModel(FakeModel):
  """FakeModel whose call fails whenever a batch holds the text "boom", and whose token count fails on "count"."""

  def predict(self, texts, pairs=None):
    if "boom" in texts:
      self.calls.append((list(texts), pairs))
      raise ValueError("the model cannot take boom")
    return super().predict(texts, pairs)

  def token_count(self, text, pair=None):
    if text == "count":
      raise ValueError("cannot count")
    return super().token_count(text, pair)


def test_one_failing_request_fails_alone_in_its_batch():
  """Requests batched with one that makes the model raise get their answers (the batch runs again one request at a
  time); a request whose token count raises (in a window cut into batches) fails alone too."""
  gate = threading.Event()
  model = FailingModel(gate)

  async def scenario():
    batcher = batching.Batcher(model.predict, model.token_count, max_batch_size=4, batch_timeout_s=0.5, max_queue=16)
    batcher.start()
    held = asyncio.ensure_future(batcher.submit(["x"], None, timeout_s=60))
    for _ in range(1200):  # bounded (60 s): until the worker holds the first request in the model
      if model.entered.wait(0) and batcher.depth() == 0:
        break
      await asyncio.sleep(0.05)
    # Two windows: 5 rows > 4 (cut: tokens counted), then 3 rows in one model call.
    requests = [["aa", "b", "f"], ["dd", "count"], ["boom"], ["ccc"], ["e"]]
    waiting = [asyncio.ensure_future(batcher.submit(texts, None, timeout_s=60)) for texts in requests]
    for _ in range(1200):  # all queued behind it: they form the next window
      if batcher.depth() == len(requests):
        break
      await asyncio.sleep(0.05)
    gate.set()
    answers = await asyncio.gather(held, *waiting, return_exceptions=True)
    await batcher.stop()
    return requests, answers[1:]

  requests, answers = asyncio.run(scenario())
  for texts, answer in zip(requests, answers):
    if "boom" in texts:
      assert isinstance(answer, ValueError) and "boom" in str(answer)
    elif "count" in texts:
      assert isinstance(answer, ValueError) and "cannot count" in str(answer)
    else:
      assert not isinstance(answer, Exception), answer
      assert answer["n"].tolist() == [len(t) for t in texts]
  assert model.counted and any(len(texts) > 1 and "boom" in texts for texts, _ in model.calls)  # (as planned)


def test_deeply_nested_json_is_a_400():
  with pytest.raises(protocols.ApiError) as e:
    protocols.parse_json(b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
  assert e.value.status == 400 and "too deeply nested" in e.value.message


@pytest.mark.parametrize("parse, words", [
    # Nested data must be nested as the shape says (or flat): flattening rows of other lengths moves values.
    (lambda: protocols.oip_token_ids({"inputs": [_ids(shape=[1, 5]) | {"data": [[2, 5, 3], [2, 3]]}]}, LIMITS,
                                     ID_LIMITS), "inputs[0].data: the shape does not match the data"),
    (lambda: protocols.oip_inputs({"inputs": [_tensor(data=[["a", "b"]], shape=[2])]}, False, LIMITS),
     "inputs[0].data: the shape does not match the data"),
    (lambda: protocols.oip_text_tensors({"inputs": [_tensor("choices", [["a", "b", "c"], ["d"]], shape=[2, 2])]},
                                        {"choices": 2}, LIMITS), "inputs[0].data: the shape does not match the data"),
    # Dimensions are non-negative integers, not JSON booleans.
    (lambda: protocols.oip_text_tensors({"inputs": [_tensor("choices", ["a", "b", "c", "d"], shape=[1, -4])]},
                                        {"choices": 2}, LIMITS), "inputs[0].shape: [1, -4]"),
    (lambda: protocols.oip_inputs({"inputs": [_tensor(shape=[True])]}, False, LIMITS), "inputs[0].shape: [True]"),
    (lambda: protocols.oip_inputs({"inputs": [_tensor(shape=[-1])]}, False, LIMITS), "inputs[0].shape: [-1]"),
    (lambda: protocols.oip_token_ids({"inputs": [_ids(shape=[True, 3])]}, LIMITS, ID_LIMITS), "inputs[0].shape"),
    # Described by the offending value, not the list's first.
    (lambda: protocols.oip_token_ids({"inputs": [{**_ids(), "data": [2, 5.5, 3]}]}, LIMITS, ID_LIMITS),
     "inputs[0].data[1]: expected an integer (input_word_ids), got a float (5.5)"),
    (lambda: protocols.tfs_request({"inputs": "a"}, False, LIMITS), 'got a str ("a")'),
    # JSON booleans only: bool("false") is True.
    (lambda: rerank_http.rerank_request({"query": "q", "texts": ["a"], "raw_scores": "false"}, LIMITS),
     "raw_scores: expected true or false"),
    (lambda: rerank_http.rerank_request({"query": "q", "texts": ["a"], "return_text": "no"}, LIMITS),
     "return_text: expected true or false"),
    # Fields the route does not take (TEI's truncate=false, Cohere's top_n) are refused, not dropped without a word
    # (truncate=true, what the server does anyway, is served: test_rerank_accepts_truncate_true).
    (lambda: rerank_http.rerank_request({"query": "q", "texts": ["a"], "truncate": False}, LIMITS),
     "truncate: not a field of /rerank (or a value it does not offer); its fields are ['model', 'query', 'texts', "
     "'return_text', 'raw_scores']"),
    (lambda: rerank_http.rerank_request({"query": "q", "texts": ["a"], "truncation_direction": "left"}, LIMITS),
     "truncation_direction: not a field"),
    (lambda: rerank_http.rerank_request({"query": "q", "texts": ["a"], "top_n": 1}, LIMITS), "top_n: not a field"),
    # TF Serving: an unknown signature is refused, and the second segment is named once per row.
    (lambda: protocols.tfs_request({"signature_name": "nope", "instances": ["a"]}, False, LIMITS),
     "signature_name: 'nope' is not a signature of this model; its signatures are ['serving_default']"),
    (lambda: protocols.tfs_request({"instances": [{"text": "a", "text_pair": "b", "text_b": "c"}]}, True, LIMITS),
     "instances[0]: both text_pair and text_b"),
    (lambda: protocols.tfs_request({"inputs": {"text": ["a"], "text_pair": ["b"], "text_b": ["c"]}}, True, LIMITS),
     "inputs: both text_pair and text_b"),
])
def test_contradictory_or_mistyped_fields_are_a_400_naming_them(parse, words):
  with pytest.raises(protocols.ApiError) as e:
    parse()
  assert e.value.status == 400 and words in e.value.message, e.value.message


@pytest.mark.parametrize("body,words", [
    ({"query": "q", "documents": []}, "documents: expected a non-empty list of strings"),
    ({"query": "q", "documents": "a"}, "documents: expected a non-empty list"),
    ({"query": "q", "documents": ["a", {"title": "t"}]}, 'documents[1]: an object without a string "text"'),
    ({"query": "q", "documents": ["a", 3]}, "documents[1]: expected a string"),
    ({"query": "", "documents": ["a"]}, "query: expected a non-empty string"),
    ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n: expected a whole number of documents ≥ 1"),
    ({"query": "q", "documents": ["a"], "top_n": True}, "top_n: expected a whole number"),
    ({"query": "q", "documents": ["a"], "top_n": 2.5}, "top_n: expected a whole number"),
    ({"query": "q", "documents": ["a"], "return_documents": "yes"}, "return_documents: expected true or false"),
    ({"query": "q", "documents": ["a"], "rank_fields": ["text"]}, "rank_fields: not a field of /v1/rerank"),
    ({"query": "q", "texts": ["a"]}, "texts: not a field of /v1/rerank"),
    ({"model": 3, "query": "q", "documents": ["a"]}, "model: expected a model name"),
])
def test_cohere_rerank_refusals_name_the_field(body, words):
  with pytest.raises(protocols.ApiError) as e:
    rerank_http.cohere_request(body, LIMITS)
  assert e.value.status == 400 and words in e.value.message, e.value.message


def test_cohere_rerank_reads_strings_and_objects_and_cuts_at_top_n():
  body = {"model": "r", "query": "q", "documents": ["a", {"text": "b", "id": 7}], "top_n": 5}
  assert rerank_http.cohere_request(body, LIMITS) == ("r", "q", ["a", "b"], 5, False)
  answer = rerank_http.cohere_response("r", [0.2, 0.9, 0.2], [0.2, 0.9, 0.2], ["a", "b", "c"], 2, True, 12)
  assert answer["results"] == [{"index": 1, "relevance_score": 0.9, "document": {"text": "b"}},
                               {"index": 0, "relevance_score": 0.2, "document": {"text": "a"}}]  # (ties: request order)
  assert answer["usage"] == {"total_tokens": 12} and answer["model"] == "r"
  assert len(rerank_http.cohere_response("r", [0.1], [0.1], ["a"], None, False, 1)["results"]) == 1


def test_rerank_accepts_truncate_true():
  """TEI clients send truncate=true (and truncation_direction=right) by habit: what this server does anyway."""
  for value in ("false", 0, "no"):  # (served as true: only the JSON false was refused)
    with pytest.raises(protocols.ApiError, match="truncate: expected true or false"):
      protocols.tei_embed_request({"inputs": "a", "truncate": value}, LIMITS)
  body = {"query": "q", "texts": ["a", "b"], "truncate": True, "truncation_direction": "right"}
  assert rerank_http.rerank_request(body, LIMITS)[1:3] == ("q", ["a", "b"])


def test_data_nested_as_the_shape_or_flat_is_read_and_known_signatures_answer():
  ids = protocols.oip_token_ids({"inputs": [_ids(rows=[(2, 5), (2, 6)])]}, LIMITS, ID_LIMITS)[0]
  assert ids.tolist() == [[2, 5], [2, 6]]
  choices = {"inputs": [_tensor("choices", [["a", "b"], ["c", "d"]], shape=[2, 2])]}
  assert protocols.oip_text_tensors(choices, {"choices": 2}, LIMITS)[0] == {"choices": [["a", "b"], ["c", "d"]]}
  assert rerank_http.rerank_request({"query": "q", "texts": ["a"], "raw_scores": True, "return_text": False},
                                  LIMITS)[3:] == (False, True)
  for signature in ("serving_default", "serve_text"):
    assert protocols.tfs_request({"signature_name": signature, "instances": ["a"]}, False, LIMITS,
                                 ("serving_default", "serve_text"))[0] == ["a"]


def test_an_empty_outputs_list_asks_for_every_output():
  """OIP's `"outputs": []` is every output, as absent is (the spec, KServe, Triton, and this server's gRPC route,
  whose repeated field cannot tell empty from absent): it answered no outputs at all over REST."""
  assert protocols.oip_inputs({"inputs": [_tensor()], "outputs": []}, False, LIMITS) == (["a"], None, None)
  assert protocols.oip_token_ids({"inputs": [_ids()], "outputs": []}, LIMITS, ID_LIMITS)[3] is None
  assert protocols.oip_text_tensors({"inputs": [_tensor("question")], "outputs": []}, {"question": 1},
                                    LIMITS)[1] is None
  outputs = {"label": np.asarray(["x"], object), "label_id": np.asarray([1], np.int64)}
  assert [t["name"] for t in protocols.oip_response("m", outputs, None, None)["outputs"]] == ["label", "label_id"]


def test_openai_nulls_count_as_absent():
  """`encoding_format: null` is the default, "float", as `model: null` and `dimensions: null` are absent (clients
  that write every optional field send nulls); a value that is neither float nor base64 is still refused."""
  body = {"model": None, "input": "hi", "encoding_format": None, "dimensions": None}
  assert protocols.openai_embedding_request(body, LIMITS) == (None, ["hi"], True, "float")
  assert protocols.openai_dimensions(body) is None
  for bad in ("", "FLOAT", 1):
    with pytest.raises(protocols.ApiError, match="encoding_format: "):
      protocols.openai_embedding_request({"input": "hi", "encoding_format": bad}, LIMITS)


TFS_SIGNATURES = ("serving_default", "serve_text", "serve_text_pair", "embed")


@pytest.mark.parametrize("signature, body, words", [
    ("serve_text", {"instances": [{"text": "a", "text_b": "b"}]},
     "instances[].text_b: signature_name 'serve_text' takes the inputs ['text'] per row"),
    ("serve_text", {"inputs": {"text": ["a"], "text_pair": ["b"]}},
     "inputs.text_pair: signature_name 'serve_text' takes the inputs ['text'] per row"),
    ("embed", {"instances": [{"text": "a", "text_b": "b"}]}, "signature_name 'embed' takes the inputs ['text']"),
    ("serve_text_pair", {"instances": ["a"]},
     "text_b: missing; signature_name 'serve_text_pair' takes the inputs ['text', 'text_b'] per row"),
    ("serve_text_pair", {"instances": [{"text": "a"}]}, "text_b: missing;"),
    ("serve_text_pair", {"inputs": {"text": ["a"]}}, "text_b: missing;"),
])
def test_tf_serving_signature_name_decides_the_inputs(signature, body, words):
  """`signature_name` is honoured, not only checked: serve_text (and embed) take `text` alone, serve_text_pair takes
  `text` and `text_b`, as their SavedModel signatures (serving.export) do; a request that does not send them is a
  400 naming the signature's inputs, rather than an answer of another signature."""
  with pytest.raises(protocols.ApiError) as e:
    protocols.tfs_request({"signature_name": signature, **body}, True, LIMITS, TFS_SIGNATURES)
  assert e.value.status == 400 and words in e.value.message, e.value.message


def test_tf_serving_signatures_answer_their_own_inputs_and_the_default_both():
  pair = {"instances": [{"text": "a", "text_b": "b"}]}
  assert protocols.tfs_request({"signature_name": "serve_text_pair", **pair}, True, LIMITS,
                               TFS_SIGNATURES) == (["a"], ["b"], True)
  assert protocols.tfs_request({"signature_name": "serve_text_pair", "inputs": {"text": ["a"], "text_pair": ["b"]}},
                               True, LIMITS, TFS_SIGNATURES) == (["a"], ["b"], False)
  assert protocols.tfs_request({"signature_name": "serve_text", "instances": ["a"]}, True, LIMITS,
                               TFS_SIGNATURES) == (["a"], None, True)
  for default in ({"signature_name": "serving_default"}, {}):  # the default takes what the model takes, as before
    assert protocols.tfs_request({**default, **pair}, True, LIMITS, TFS_SIGNATURES) == (["a"], ["b"], True)
    assert protocols.tfs_request({**default, "instances": ["a"]}, True, LIMITS, TFS_SIGNATURES) == (["a"], None, True)


# ---------------------------------------------------------------------------------- oversized requests (audit s29)
@pytest.mark.parametrize("parse", [
    lambda outputs: protocols.oip_inputs({"inputs": [_tensor()], "outputs": outputs}, False, LIMITS),
    lambda outputs: protocols.oip_token_ids({"inputs": [_ids()], "outputs": outputs}, LIMITS, ID_LIMITS),
    lambda outputs: protocols.oip_text_tensors({"inputs": [_tensor("question")], "outputs": outputs},
                                               {"question": 1}, LIMITS),
])
def test_an_output_asked_for_twice_is_a_400_naming_it(parse):
  """Audit s29 safety 1: `outputs` repeating a name was answered with one copy of the output per entry: a 32 MB
  request asking for an embedding a million times built gigabytes. A repeated name is refused, as a repeated input
  is, before the model runs."""
  with pytest.raises(protocols.ApiError) as e:
    parse([{"name": "label"}, {"name": "probabilities"}, {"name": "label"}])
  assert e.value.status == 400 and e.value.message.startswith("outputs: 'label' given twice"), e.value.message


def test_more_outputs_asked_for_than_the_model_has_is_a_400():
  outputs = {"label": np.asarray(["x"], object), "label_id": np.asarray([1], np.int64)}
  with pytest.raises(protocols.ApiError) as e:
    protocols.oip_response("m", outputs, ["label", "label_id", "other"], None)
  assert e.value.status == 400 and "outputs: 3 entries, but m has 2" in e.value.message, e.value.message


class Unread(list):
  """`data` that fails the test if any of its values is read (only its length may be)."""

  def __iter__(self):
    raise AssertionError("the data was walked before the shape was checked")

  def __getitem__(self, index):
    raise AssertionError("the data was read before the shape was checked")


@pytest.mark.parametrize("parse, status, words", [
    (lambda: protocols.oip_token_ids({"inputs": [_ids(shape=[5, 3]) | {"data": Unread([2] * 15)}]}, LIMITS,
                                     ID_LIMITS), 413, "inputs[0].shape: [5, 3]: 5 rows, more than the server's limit"),
    (lambda: protocols.oip_token_ids({"inputs": [_ids(shape=[1, 9]) | {"data": Unread([2] * 9)}]}, LIMITS,
                                     ID_LIMITS), 400, "9 tokens per row, more than the model's 8 positions"),
    (lambda: protocols.oip_token_ids({"inputs": [_ids(shape=[1, 3]) | {"data": Unread([2] * 1_000_000)}]}, LIMITS,
                                     ID_LIMITS), 413, "inputs[0].shape: [1, 3] holds 3 values but data holds 1000000"),
    (lambda: protocols.oip_token_ids({"inputs": [_ids(), _ids("input_mask", shape=[1, 3]) | {
        "data": Unread([1] * 1_000_000)}]}, LIMITS, ID_LIMITS), 413, "inputs[1].shape: [1, 3] holds 3 values"),
    (lambda: protocols.oip_inputs({"inputs": [_tensor(shape=[10**9]) | {"data": Unread(["a"] * 5)}]}, False, LIMITS),
     413, "inputs[0].shape: [1000000000]: 1000000000 rows"),
    (lambda: protocols.oip_inputs({"inputs": [_tensor(shape=[1]) | {"data": Unread([""] * 1_000_000)}]}, False,
                                  LIMITS), 413, "inputs[0].shape: [1] holds 1 values but data holds 1000000"),
    (lambda: protocols.oip_text_tensors({"inputs": [_tensor("question", shape=[5]) | {"data": Unread(["q"] * 5)}]},
                                        {"question": 1}, LIMITS), 413, "5 rows, more than the server's limit of 4"),
])
def test_a_shape_beyond_the_limits_is_refused_before_its_data_is_read(parse, status, words):
  """Audit s29 safety 3: a token-id body of millions of values was walked value by value (and copied into an array)
  before its row count and length were checked against the limits: seconds of the event loop per request. The
  declared shape is checked first, and data holding more values than it declares is refused by its length."""
  with pytest.raises(protocols.ApiError) as e:
    parse()
  assert e.value.status == status and words in e.value.message, e.value.message
