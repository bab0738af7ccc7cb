"""Over --max_inputs is 413 wherever the count is known to be over it, also when `shape` disagrees with `data`.

Before: a request whose `shape` agreed with its data and was over the limit got 413, but the same data under a
smaller `shape` got 400 ("shape holds 2 values but data holds 10"): the mismatch was checked before the limit. The
limit is now known from the data's length too: flat data holding more values than --max_inputs rows of the shape
hold, or nested data of more rows. Data within the limit that disagrees with its shape stays a 400. Protocol-level
cases (http_protocols) and one over the REST route (the app in process, a stand-in model).
"""

import warnings

import pytest

from official_albert.serving import http_protocols as protocols

LIMITS = protocols.Limits(max_inputs=4, max_text_chars=20)
ID_LIMITS = protocols.IdLimits(vocab_size=100, max_length=8, type_vocab_size=2)


def _status(parse):
  with pytest.raises(protocols.ApiError) as e:
    parse()
  return e.value.status, e.value.message


def _text(data, shape):
  return {"inputs": [{"name": "text", "datatype": "BYTES", "shape": shape, "data": data}]}


def _ids(data, shape):
  return {"inputs": [{"name": "input_word_ids", "datatype": "INT32", "shape": shape, "data": data}]}


@pytest.mark.parametrize("body, over", [
    (_text(["a"] * 10, [10]), True),  # shape agrees, over: 413 (as before)
    (_text(["a"] * 10, [2]), True),  # shape disagrees, data over: 413 (was 400)
    (_text(["a"] * 10, [2, 1]), True),
    (_text(["a"] * 3, [2]), False),  # shape disagrees, data within the limit: 400
])
def test_texts_over_the_limit_are_413_whatever_the_shape(body, over):
  status, message = _status(lambda: protocols.oip_inputs(body, False, LIMITS))
  assert status == (413 if over else 400), message
  assert ("--max_inputs" in message) == over, message


@pytest.mark.parametrize("body, over", [
    (_ids([2, 5] * 10, [10, 2]), True),
    (_ids([2, 5] * 10, [1, 2]), True),  # flat: 20 values, more than 4 rows of 2 hold (was 400)
    (_ids([[2, 5]] * 10, [1, 2]), True),  # nested: 10 rows (was 400)
    (_ids([[2, 5]] * 5, [2, 3]), True),  # nested: 5 rows, within the shape's 6 values but over 4 rows (was 400)
    (_ids([2, 5] * 3, [1, 2]), False),  # 3 rows, within the limit: 400
    (_ids([[2, 5]] * 3, [2, 3]), False),
])
def test_token_ids_over_the_limit_are_413_whatever_the_shape(body, over):
  status, message = _status(lambda: protocols.oip_token_ids(body, LIMITS, ID_LIMITS))
  assert status == (413 if over else 400), message


def test_a_task_heads_rows_over_the_limit_are_413_whatever_the_shape():
  """Multiple choice's [n, k] choices: flat data of more than --max_inputs rows of k texts."""
  body = {"inputs": [{"name": "choices", "datatype": "BYTES", "shape": [1, 2], "data": ["a"] * 10}]}
  status, message = _status(lambda: protocols.oip_text_tensors(body, {"choices": 2}, LIMITS))
  assert status == 413, message


def test_the_rest_route_answers_413_when_shape_and_data_disagree_over_the_limit():
  pytest.importorskip("fastapi")
  pytest.importorskip("httpx")
  with warnings.catch_warnings():  # (as test_http_app: Starlette's test client warns about httpx)
    warnings.simplefilter("ignore")
    from fastapi import testclient  # noqa: PLC0415
  from official_albert.serving import http_app  # noqa: PLC0415
  from tests.official_albert.serving.test_http_app import StandIn  # noqa: PLC0415
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4, max_inputs=4),
                            http_app.ServerState())
  with testclient.TestClient(app) as client:
    for shape, status in (([10], 413), ([2], 413), ([10, 1], 413)):
      answer = client.post("/v2/models/m/infer", json=_text(["a"] * 10, shape))
      assert answer.status_code == status, (shape, answer.text)
    answer = client.post("/v2/models/m/infer", json=_text(["a"] * 3, [2]))
    assert answer.status_code == 400 and "holds 2 values but data holds 3" in answer.text, answer.text
