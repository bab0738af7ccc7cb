"""Depth-wise continuous batching (serving.depthwise_slots, serving.depthwise_batching, `serve --depthwise_batching`).

Equivalence: every text's label, probabilities and exit iteration equal `pipelines.classify(folder, [text],
patience=P)` alone — whatever rows, iterations and length buckets it shared its steps with — for texts admitted in
a shuffled order into fewer slots than texts, with and without a second segment; patience 0 equals the plain model.
Several iterations per step (`iterations_per_step`) answer as one per step, rows leaving mid-step included. The
OpenVINO runtime (the block converted at start-up) the same. Over HTTP: the same under concurrent clients with
mixed lengths, and SIGTERM mid-load loses no request. A step that fails in one length bucket answers every request
at once (the rows that left before it with their answers, the others with the error), and the server's default
iterations per step serve a model with fewer layers. Refusals name why. Nothing asserts on speed.

Long because: the slots, the batcher and the server are checked on one module-scoped model folder (its exit heads
made so that texts leave at different iterations); split, each file would build and load it again.
"""

import asyncio
import concurrent.futures
import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.serving import pipelines
from official_albert.serving.batching import RequestTimeout
from official_albert.serving.depthwise_batching import DepthwiseBatcher
from official_albert.serving.depthwise_slots import bucket_lengths
from official_albert.serving.depthwise_slots import check_model
from official_albert.serving.depthwise_slots import DepthwiseSlots
from official_albert.serving.depthwise_slots import StepFailed
from official_albert.tokenization import pack_ids
from tests import tiny

LAYERS = 6
TINY = dict(tiny.MODEL, num_hidden_layers=LAYERS, max_position_embeddings=64)
LABELS = ["billing", "bug", "praise"]
WORDS = ("the invoice is wrong it crashes on start great work nothing works at all thanks app slow best support ever "
         "my money back please fix").split()


def _texts(n, seed):
  """Texts of 1 to 45 words (every length bucket of a 64-token model), in no particular order."""
  rng = np.random.default_rng(seed)
  return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 46)))) for _ in range(n)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, spm_model_file):
  """A 3-label classifier directory with exit heads whose texts leave at different iterations."""
  root = tmp_path_factory.mktemp("depthwise")
  tokenizer = pipelines.FullTokenizer(spm_model_file)
  rows = [pack_ids(ids, None, 64) for ids in tokenizer.encode_ids_batch(_texts(16, 99))]
  x = {k: np.asarray([r[k] for r in rows], np.int32) for k in rows[0]}
  model = tiny.exit_head_classifier(x, scale=30.0, spread=15.0, **TINY)
  save_pretrained(model, str(root / "cls"), spm_model_file=spm_model_file)
  return tiny.write_labels(root / "cls", LABELS)


@pytest.fixture(scope="module")
def loaded(folder):
  model, tokenizer, _ = pipelines.resolve_model(folder, "classifier", None, True, "hf", "classify")
  return model, tokenizer


def _run_slots(slots, tokenizer, texts, pairs, order):
  """Every text through `slots`, admitted in `order` whenever a slot is free → {index: Finished}."""
  waiting, out = list(order), {}
  while waiting or slots.occupied():
    while waiting and slots.free():
      i = waiting.pop(0)
      ids_b = tokenizer.encode_ids_batch([pairs[i]])[0] if pairs is not None else None
      slots.add(i, slots.pack(tokenizer.encode_ids_batch([texts[i]])[0], ids_b))
    for row in slots.step():
      out[row.owner] = row
  return out


def _check_alone(out, loaded, texts, pairs, patience):
  model, tokenizer = loaded
  exits = []
  for i, text in enumerate(texts):
    want = pipelines.classify(model, [text], text_pairs=None if pairs is None else [pairs[i]], tokenizer=tokenizer,
                              labels=LABELS, patience=patience or None)[0]
    probabilities = tf.nn.softmax(out[i].logits).numpy()
    assert out[i].exit_iteration == want["exit_iteration"], (i, text)
    assert int(np.argmax(probabilities)) == want["label_id"], (i, text)
    np.testing.assert_allclose(probabilities, [want["probabilities"][name] for name in LABELS], atol=1e-5)
    exits.append(out[i].exit_iteration)
  return exits


@pytest.mark.slow
@pytest.mark.parametrize("patience,runtime", [(0, "tensorflow"), (1, "tensorflow"), (2, "tensorflow"),
                                              (2, "openvino")])
def test_every_text_answers_as_classify_alone_whatever_it_shared_steps_with(loaded, patience, runtime):
  if runtime == "openvino":
    pytest.importorskip("openvino")
  model, tokenizer = loaded
  texts = _texts(24, patience)
  order = np.random.default_rng(patience).permutation(len(texts))
  slots = DepthwiseSlots(model, patience, slots=5, seq_length=64, runtime=runtime)
  out = _run_slots(slots, tokenizer, texts, None, order)
  exits = _check_alone(out, loaded, texts, None, patience)
  if patience:
    assert len(set(exits)) > 1, "the fixture should make texts leave at different iterations"
  else:
    assert set(exits) == {LAYERS}
  assert slots.occupied() == 0


@pytest.mark.parametrize("slots,buckets", [(1, None), (3, ())])
def test_pairs_one_slot_and_one_bucket(loaded, slots, buckets):
  model, tokenizer = loaded
  texts, pairs = _texts(6, 7), _texts(6, 8)
  out = _run_slots(DepthwiseSlots(model, 2, slots=slots, seq_length=64, length_buckets=buckets), tokenizer, texts,
                   pairs, range(6))
  _check_alone(out, loaded, texts, pairs, 2)


def test_patience_zero_is_the_plain_model(loaded):
  model, tokenizer = loaded
  texts = _texts(6, 3)
  out = _run_slots(DepthwiseSlots(model, 0, slots=4, seq_length=64), tokenizer, texts, None, range(6))
  plain = [pipelines.classify(model, [t], tokenizer=tokenizer, labels=LABELS)[0] for t in texts]
  for i, want in enumerate(plain):
    np.testing.assert_allclose(tf.nn.softmax(out[i].logits).numpy(),
                               [want["probabilities"][name] for name in LABELS], atol=1e-5)
    assert out[i].exit_iteration == LAYERS


@pytest.mark.slow
@pytest.mark.parametrize("patience,k,runtime", [(2, 3, "tensorflow"), (1, LAYERS, "tensorflow"),
                                                (0, 4, "tensorflow"), (2, 3, "openvino")])
def test_several_iterations_per_step_answer_as_one_per_step_and_as_classify(loaded, patience, k, runtime):
  """k iterations per call: rows that leave at an inner iteration keep that iteration's answer; the answers equal
  k = 1's (TensorFlow) and `classify` alone's, with texts of every bucket admitted in a shuffled order into fewer
  slots."""
  if runtime == "openvino":
    pytest.importorskip("openvino")
  model, tokenizer = loaded
  texts = _texts(20, 30 + k)
  order = np.random.default_rng(k).permutation(len(texts))
  slots = DepthwiseSlots(model, patience, slots=5, seq_length=64, runtime=runtime, iterations_per_step=k)
  out = _run_slots(slots, tokenizer, texts, None, order)
  exits = _check_alone(out, loaded, texts, None, patience)
  one = _run_slots(DepthwiseSlots(model, patience, slots=5, seq_length=64), tokenizer, texts, None, order)
  for i in range(len(texts)):
    assert out[i].exit_iteration == one[i].exit_iteration
    np.testing.assert_allclose(tf.nn.softmax(out[i].logits).numpy(), tf.nn.softmax(one[i].logits).numpy(), atol=1e-5)
  if patience:
    # Every row joins at a step's start, so an exit iteration that k does not divide left in the middle of a step.
    assert any(e % k for e in exits), f"the fixture should make some rows leave mid-step: {sorted(set(exits))}"
  assert slots.occupied() == 0 and all(b.state is None for b in slots.buckets.values())


def test_rows_join_between_steps_of_k_iterations(loaded):
  """A text added while others are in the middle of theirs starts at iteration 0 at the next call: after one step
  of 3 iterations it is at iteration 3 (or has left), beside rows at iteration 6."""
  model, tokenizer = loaded
  slots = DepthwiseSlots(model, 0, slots=4, seq_length=64, iterations_per_step=3, length_buckets=())
  ids = tokenizer.encode_ids_batch(_texts(3, 4))
  slots.add("a", slots.pack(ids[0]))
  slots.add("b", slots.pack(ids[1]))
  assert slots.step() == []  # a and b at iteration 3 of 6
  slots.add("c", slots.pack(ids[2]))
  finished = slots.step()  # a and b reach 6 and leave; c, which joined now, is at 3
  assert sorted(r.owner for r in finished) == ["a", "b"] and {r.exit_iteration for r in finished} == {LAYERS}
  assert slots.occupied() == 1
  (last,) = slots.step()
  assert last.owner == "c" and last.exit_iteration == LAYERS
  want = pipelines.classify(model, [_texts(3, 4)[2]], tokenizer=tokenizer, labels=LABELS)[0]
  np.testing.assert_allclose(tf.nn.softmax(last.logits).numpy(), [want["probabilities"][name] for name in LABELS],
                             atol=1e-5)


def test_buckets_cut_and_refusals(loaded):
  model, tokenizer = loaded
  assert bucket_lengths(64) == [16, 32, 64] and bucket_lengths(100) == [16, 32, 64, 100] and bucket_lengths(8) == [8]
  assert bucket_lengths(64, ()) == [64] and bucket_lengths(64, [48, 24, 200]) == [24, 48, 64]
  with pytest.raises(ValueError, match="must be >= 3 tokens"):
    bucket_lengths(64, [2])
  slots = DepthwiseSlots(model, 1, slots=1, seq_length=64)
  assert len(slots.pack([5] * 10)["input_word_ids"]) == 16
  assert len(slots.pack([5] * 200)["input_word_ids"]) == 64  # cut at the served length, as classify cuts
  slots.add("a", slots.pack([5]))
  with pytest.raises(RuntimeError, match="all 1 slots are taken"):
    slots.add("b", slots.pack([5]))
  with pytest.raises(ValueError, match="slots=0"):
    DepthwiseSlots(model, 1, slots=0, seq_length=64)
  with pytest.raises(ValueError, match=r"iterations_per_step=0 must be an integer in 1\.\.6"):
    DepthwiseSlots(model, 1, slots=2, seq_length=64, iterations_per_step=0)
  with pytest.raises(ValueError, match="runtime='onnx' is not one of"):
    DepthwiseSlots(model, 1, slots=2, seq_length=64, runtime="onnx")
  plain = build_model("classifier", AlbertConfig(**TINY), num_labels=3)
  assert "no exit heads" in check_model(plain)
  grouped = build_model("classifier", AlbertConfig(**{**TINY, "num_hidden_groups": 2}), num_labels=3,
                        exit_heads=True)
  assert "do not share one block" in check_model(grouped)
  sparse = build_model("classifier", AlbertConfig(**{**TINY, "attention_type": "block_sparse", "block_size": 4,
                                                     "num_random_blocks": 1}), num_labels=3, exit_heads=True)
  assert "random blocks" in check_model(sparse)
  with pytest.raises(ValueError, match="cannot run depth-wise: it has no exit heads"):
    DepthwiseSlots(plain, 1, slots=2, seq_length=64)


def _fail_in_bucket(slots, monkeypatch, length):
  """Makes `slots`' graph call raise in the `length`-token bucket (as an out-of-memory error would), after the
  newcomers were taken from the joining list and after the shorter buckets' rows left."""
  real = slots._step

  def failing(*args):
    if args[-1].shape[1] == length:  # (the newcomers' input_type_ids [n, length])
      raise RuntimeError(f"injected: out of memory in the {length}-token bucket")
    return real(*args)

  monkeypatch.setattr(slots, "_step", failing)


SHORT, LONG = "great work", " ".join(["invoice"] * 40)  # the 16- and the 64-token bucket


def test_a_step_failing_in_one_bucket_returns_the_rows_that_left_before_it(loaded, monkeypatch):
  """The short text leaves in the 16-token bucket, then the 64-token bucket's call fails in the same step: the error
  carries the short row (it is out of the slots), `clear` returns the long newcomer, and the slots serve on."""
  model, tokenizer = loaded
  slots = DepthwiseSlots(model, 0, slots=3, seq_length=64, iterations_per_step=LAYERS)
  _fail_in_bucket(slots, monkeypatch, 64)
  for text in (SHORT, LONG):
    slots.add(text, slots.pack(tokenizer.encode_ids_batch([text])[0]))
  with pytest.raises(StepFailed, match="step failed in the 64-token bucket: RuntimeError: injected") as failed:
    slots.step()
  assert [(r.owner, r.exit_iteration) for r in failed.value.finished] == [(SHORT, LAYERS)]
  assert slots.clear() == [LONG] and slots.occupied() == 0
  monkeypatch.undo()
  slots.add(LONG, slots.pack(tokenizer.encode_ids_batch([LONG])[0]))
  assert [r.owner for r in slots.step()] == [LONG]


async def _served_once_queued(batcher, waiting, queued=1):
  """Starts `batcher` once `queued` requests wait in its queue, awaits `waiting`, and stops it."""
  while batcher.depth() < queued:
    await asyncio.sleep(0)
  batcher.start()
  try:
    return await waiting
  finally:
    await batcher.stop()


def test_a_failed_step_answers_every_request_at_once(folder, monkeypatch):
  """Through the batcher: the request whose text left before the failing bucket gets its answer (classify's), the
  one whose text was in it gets the error — neither waits for its timeout — and the slots are empty."""
  from official_albert.serving import served_model  # noqa: PLC0415
  served = served_model.ServedModel("cls", folder)
  served.enable_depthwise(3, iterations_per_step=LAYERS)
  _fail_in_bucket(served.slots, monkeypatch, 64)
  batcher = DepthwiseBatcher(served.slots, served.tokenize, served.finish_logits, max_queue=4)

  async def scenario():
    requests = [asyncio.ensure_future(batcher.submit([text], None, timeout_s=60)) for text in (SHORT, LONG)]
    # (both queued before the worker starts: they share its first step)
    return await _served_once_queued(batcher, asyncio.gather(*requests, return_exceptions=True), 2)

  short, long = asyncio.run(scenario())
  assert isinstance(long, RuntimeError) and "injected: out of memory in the 64-token bucket" in str(long)
  want = pipelines.classify(folder, [SHORT])[0]
  assert short["label"].tolist() == [want["label"]] and short["exit_iteration"].tolist() == [LAYERS]
  np.testing.assert_allclose(short["probabilities"][0], [want["probabilities"][n] for n in LABELS], atol=1e-5)
  assert served.slots.occupied() == 0


def test_the_worker_fills_every_free_slot_before_a_step(folder):
  """Mutation audit 24 F7: a worker that admitted one row a step still answered right (what every other test checks),
  with its slots mostly empty; one request of 3 texts waiting for 3 free slots shares the first step whole."""
  from official_albert.serving import served_model  # noqa: PLC0415
  served = served_model.ServedModel("cls", folder)
  served.enable_depthwise(3, iterations_per_step=1)
  rows_per_step = []
  batcher = DepthwiseBatcher(served.slots, served.tokenize, served.finish_logits, max_queue=4,
                             observe_batch=rows_per_step.append)

  async def scenario():
    request = asyncio.ensure_future(batcher.submit([SHORT, LONG, SHORT], None, timeout_s=60))
    return await _served_once_queued(batcher, request)  # (queued before the worker starts)

  got = asyncio.run(scenario())
  assert len(got["label"]) == 3
  assert rows_per_step[0] == 3, rows_per_step


def test_a_request_given_up_frees_its_queue_place(folder):
  """A request whose caller timed out no longer holds a place of max_queue (it did until the worker passed it by), and
  the worker skips it: the live request behind it is answered."""
  from official_albert.serving import served_model  # noqa: PLC0415
  served = served_model.ServedModel("cls", folder)
  served.enable_depthwise(3, iterations_per_step=LAYERS)
  batcher = DepthwiseBatcher(served.slots, served.tokenize, served.finish_logits, max_queue=1)

  async def scenario():
    with pytest.raises(RequestTimeout):  # (the worker has not started: nothing runs it)
      await batcher.submit([SHORT], None, timeout_s=0.05)
    assert batcher.depth() == 0
    request = asyncio.ensure_future(batcher.submit([LONG], None, timeout_s=60))
    return await _served_once_queued(batcher, request)

  got = asyncio.run(scenario())
  assert got["label"].tolist() == [pipelines.classify(folder, [LONG])[0]["label"]]


def test_the_worker_survives_its_own_errors_and_stop_answers_what_it_held(folder, monkeypatch):
  """Review s50: an error outside the model's step (a request of 2 texts and 1 pair reached `zip` and an IndexError)
  killed the worker thread silently: every later request timed out. Now the pair count is refused at submit, a worker
  error fails the requests in flight only, and `stop` answers the rows still in the slots and the queued requests
  (they waited for their timeouts) and leaves the slots empty. The metadata lists no token-id inputs, which a
  depth-wise model refuses."""
  from official_albert.serving import served_model  # noqa: PLC0415
  served = served_model.ServedModel("cls", folder)
  served.enable_depthwise(2, iterations_per_step=1)
  assert [i["name"] for i in served.inputs_metadata()] == ["text", "text_pair"]
  batcher = DepthwiseBatcher(served.slots, served.tokenize, served.finish_logits, max_queue=8)
  pack, broken = served.slots.pack, [True]

  def pack_once_broken(*args):
    if broken.pop() if broken else False:
      raise RuntimeError("injected: a worker bug")
    return pack(*args)

  monkeypatch.setattr(served.slots, "pack", pack_once_broken)

  async def scenario():
    with pytest.raises(ValueError, match="1 pairs for 2 texts"):
      await batcher.submit([SHORT, LONG], ["x"], timeout_s=60)
    batcher.start()
    with pytest.raises(RuntimeError, match="injected: a worker bug"):
      await batcher.submit([SHORT], None, timeout_s=60)
    after = await batcher.submit([LONG], None, timeout_s=60)  # (the worker lives on)
    await batcher.stop()
    return after

  async def never_started():
    idle = DepthwiseBatcher(served.slots, served.tokenize, served.finish_logits, max_queue=8)
    request = asyncio.ensure_future(idle.submit([SHORT], None, timeout_s=60))
    while idle.depth() < 1:
      await asyncio.sleep(0)
    await idle.stop()
    return await asyncio.gather(request, return_exceptions=True)

  async def stopped_midway():
    again = DepthwiseBatcher(served.slots, served.tokenize, served.finish_logits, max_queue=8)
    step = served.slots.step

    def held_step():  # (the second step waits for the stop: 6 texts of 6 iterations each cannot finish in 2 steps)
      if again.steps >= 1:
        assert again._stopping.wait(60)
      return step()

    monkeypatch.setattr(served.slots, "step", held_step)
    request = asyncio.ensure_future(again.submit(_texts(6, 3), None, timeout_s=60))
    while again.depth() < 1:
      await asyncio.sleep(0)
    again.start()
    while again.steps < 1:
      await asyncio.sleep(0.01)
    await again.stop()
    return await asyncio.gather(request, return_exceptions=True)

  after = asyncio.run(scenario())
  assert after["label"].tolist() == [pipelines.classify(folder, [LONG])[0]["label"]]
  (queued,) = asyncio.run(never_started())
  assert isinstance(queued, RuntimeError) and "stopped before answering" in str(queued), queued
  (midway,) = asyncio.run(stopped_midway())
  assert isinstance(midway, RuntimeError) and "stopped before answering" in str(midway), midway
  assert served.slots.occupied() == 0


def test_an_empty_pair_answers_as_classify_packs_it_one_segment(folder):
  """(The batcher packed a pair with no pieces `[CLS] A [SEP] [SEP]`; `classify` packs it `[CLS] A [SEP]`, as GLUE
  writes such a row in training.)"""
  from official_albert.serving import served_model  # noqa: PLC0415
  served = served_model.ServedModel("cls", folder)
  served.enable_depthwise(3, iterations_per_step=LAYERS)
  batcher = DepthwiseBatcher(served.slots, served.tokenize, served.finish_logits, max_queue=4)

  async def scenario():
    batcher.start()
    try:
      return await batcher.submit([SHORT, SHORT], ["", "  "], timeout_s=60)
    finally:
      await batcher.stop()

  got = asyncio.run(scenario())
  want = pipelines.classify(folder, [SHORT])[0]  # one segment
  for row in got["probabilities"]:
    np.testing.assert_allclose(row, [want["probabilities"][n] for n in LABELS], atol=1e-5)


def test_the_default_iterations_per_step_serve_a_model_with_fewer_layers(tmp_path, spm_model_file, caplog):
  """--depthwise_iterations is the most a step runs: the server's default 3 serves a 2-layer model at 2 per step
  (logged) and answers as classify; DepthwiseSlots called directly still refuses 3."""
  from official_albert import serve  # noqa: PLC0415
  keras.utils.set_random_seed(1)
  two = build_model("classifier", AlbertConfig(**{**TINY, "num_hidden_layers": 2}), num_labels=3, exit_heads=True)
  save_pretrained(two, str(tmp_path / "two"), spm_model_file=spm_model_file)
  folder = tiny.write_labels(tmp_path / "two", LABELS)
  with caplog.at_level(logging.INFO):
    served = serve.load_models([folder], ["two"], patience=1, depthwise_slots=2)["two"]
  assert served.slots.iterations_per_step == 2 and serve.DEFAULT_DEPTHWISE_ITERATIONS == 3
  assert "runs 2 iterations per step, not 3 (--depthwise_iterations): the model has 2" in caplog.text
  served.slots.add(SHORT, served.slots.pack(served.tokenize([SHORT])[0]))
  (row,) = served.slots.step()
  want = pipelines.classify(folder, [SHORT], patience=1)[0]
  assert row.exit_iteration == want["exit_iteration"] == 2
  np.testing.assert_allclose(tf.nn.softmax(row.logits).numpy(), [want["probabilities"][n] for n in LABELS], atol=1e-5)
  with pytest.raises(ValueError, match=r"iterations_per_step=3 must be an integer in 1\.\.2"):
    DepthwiseSlots(served.model, 1, slots=2, seq_length=64, iterations_per_step=3)


# ------------------------------------------------------------------------------------------------- over HTTP
@pytest.mark.slow
@pytest.mark.timing
def test_server_answers_as_classify_under_concurrent_clients_with_mixed_lengths(folder, loaded, tmp_path):
  httpx = pytest.importorskip("httpx")
  pytest.importorskip("fastapi")
  from tests.official_albert.serving.test_server import Server  # noqa: PLC0415 (the server harness)
  model, tokenizer = loaded
  texts = _texts(30, 21)
  expected = pipelines.classify(model, texts, tokenizer=tokenizer, labels=LABELS, patience=2, batch_size=1)
  server = Server(tmp_path, {"cls": folder}, "--depthwise_batching", "--slots=4", "--patience=2",
                  "--depthwise_iterations=3")
  try:
    server.wait_ready()

    def call(start):
      idx = [start % len(texts), (start * 7 + 3) % len(texts)][:1 + start % 2]
      body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(idx)], "data": [texts[i] for i in idx]}]}
      answer = httpx.post(f"{server.url}/v2/models/cls/infer", json=body, timeout=120)
      assert answer.status_code == 200, answer.text
      return idx, {o["name"]: o["data"] for o in answer.json()["outputs"]}

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
      results = list(pool.map(call, range(40)))
    for idx, out in results:
      assert out["label"] == [expected[i]["label"] for i in idx]
      assert out["exit_iteration"] == [expected[i]["exit_iteration"] for i in idx]
      want = [[expected[i]["probabilities"][name] for name in LABELS] for i in idx]
      np.testing.assert_allclose(np.reshape(out["probabilities"], (len(idx), -1)), want, atol=1e-5)
    assert len({e["exit_iteration"] for e in expected}) > 1
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'albert_batch_size_count{model="cls"}' in metrics
  finally:
    server.stop()


@pytest.mark.slow
@pytest.mark.timing
def test_sigterm_mid_load_loses_no_depthwise_request(folder, loaded, tmp_path):
  """120 requests at concurrency 8 into 4 slots, SIGTERM after the 60th answer: rows still in the slots finish and
  answer as `classify` alone, later requests are refused (503 or a closed connection), none is lost or hangs; exit 0."""
  pytest.importorskip("httpx")
  from tests.official_albert.serving import test_server as harness  # noqa: PLC0415 (the server harness)
  model, tokenizer = loaded
  texts = _texts(24, 5)
  expected = pipelines.classify(model, texts, tokenizer=tokenizer, labels=LABELS, patience=2, batch_size=1)
  server = harness.Server(tmp_path, {"cls": folder}, "--depthwise_batching", "--slots=4", "--patience=2",
                          "--drain_seconds=2").wait_ready()

  def send(n, sent_term):
    i = n % len(texts)
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": [texts[i]]}]}
    answer = harness.post_while_draining(f"{server.url}/v2/models/cls/infer", body, n, sent_term)
    if answer is None:
      return False
    out = {o["name"]: o["data"] for o in answer["outputs"]}
    assert out["label"] == [expected[i]["label"]] and out["exit_iteration"] == [expected[i]["exit_iteration"]]
    np.testing.assert_allclose(out["probabilities"], [expected[i]["probabilities"][name] for name in LABELS],
                               atol=1e-5)
    return True

  harness.sigterm_under_load(server, send, requests=120, sigterm_after=60)


def test_server_refuses_depthwise_for_a_model_without_exit_heads(tmp_path, spm_model_file):
  from official_albert import serve  # noqa: PLC0415
  from official_albert.serving.served_model import ModelLoadError  # noqa: PLC0415
  keras.utils.set_random_seed(1)
  plain = build_model("classifier", AlbertConfig(**TINY), num_labels=2)
  save_pretrained(plain, str(tmp_path / "plain"), spm_model_file=spm_model_file)
  with pytest.raises(ModelLoadError, match="plain: depth-wise batching: .* no exit heads"):
    serve.load_models([str(tmp_path / "plain")], ["plain"], None, depthwise_slots=4)
