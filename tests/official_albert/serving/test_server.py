"""The inference server (official_albert.serve) as a user runs it: a real process on a localhost port, real HTTP.

Equivalence: each route's answers, under 16 concurrent clients with batching on, equal the in-process pipelines on the
same folder (labels identical, probabilities and embeddings within 1e-5). Faults: malformed requests among good ones,
SIGTERM under load (nothing lost, exit 0), a full queue (503 with Retry-After, never a hang), a folder that cannot load
(start-up fails naming it). Every wait is for an event with an overall bound; nothing asserts on speed.
"""

import base64
import concurrent.futures
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from official_albert import AlbertConfig  # noqa: E402
from official_albert import model_directory as md  # noqa: E402
from official_albert.checkpoints.loading import build_model  # noqa: E402
from official_albert.checkpoints.native import save_pretrained  # noqa: E402
from official_albert.serving import embedding  # noqa: E402
from official_albert.serving import export  # noqa: E402
from official_albert.serving import pipelines  # noqa: E402
from tests import tiny  # noqa: E402
from tests.conftest import CHILD_PYTHONPATH  # noqa: E402

pytestmark = pytest.mark.slow  # servers started in a process, each answering over sockets (docs/design.md, Test tiers)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
TINY = dict(tiny.MODEL)
LABELS = ["irrelevant", "relevant"]
TAGS = ["O", "B-LOC", "B-PER"]
TEXTS = ["a gripping film", "boring", "the invoice is wrong and I want my money back now", "great work",
         "it crashes on start, every single time I open it on my phone", "ok", "Paris is in France.",
         "what a lovely day for a walk along the river with friends", "no", "the cat sat on the mat"]
PAIRS = ["a movie", "dull", "billing", "praise", "bug report", "fine", "geography", "weather", "yes", "animals"]
START_TIMEOUT_S = 300  # a loaded 2-core machine may take minutes to import TensorFlow and load the models
REQUEST_TIMEOUT_S = 120


# ----------------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def folders(tmp_path_factory, spm_model_file, tiny_model_dirs):
  """A 2-label classifier directory (labels.json), its SavedModel export, an encoder directory (hidden 32: the
  session's, tests/tiny.py) and its SavedModel export (which carries the directory's Matryoshka widths), a SQuAD
  span directory, a 3-label token classifier directory (served with --model_head=tag=token_classifier) and a
  regression (one-output) classifier directory, a multiple-choice directory
  (--model_head=mc=multiple_choice) and a pretrainer served for fill-mask (--model_head=mlm=fill_mask); the encoder
  as a sentence-transformers folder with a default prompt and max_seq_length 24 (`enc_q`) and its SavedModel (and
  OpenVINO) exports at --seq_length 64."""
  import keras
  root = tmp_path_factory.mktemp("serve")
  keras.utils.set_random_seed(5)
  classifier = build_model("classifier", AlbertConfig(**TINY), 2)
  rng = np.random.default_rng(1)  # spread the logits so that the texts get both labels
  classifier.classifier.output_weights.assign(
      50 * rng.normal(size=classifier.classifier.output_weights.shape).astype("float32"))
  save_pretrained(classifier, str(root / "cls"), spm_model_file=spm_model_file)
  (root / "cls" / "labels.json").write_text(json.dumps({"task": "text_classification", "labels": LABELS,
                                                         "multi_label": False}))
  tiny_model_dirs.copy("encoder", root / "enc")
  # As `text_embedding` records a Matryoshka-trained embedder: OpenAI's `dimensions` may ask for 16 (or the full 32).
  md.write_embedding_training_file(str(root / "enc"), {"loss": "mnrl", "matryoshka_dims": [32, 16]})
  export.export_from_model_dir(str(root / "cls"), str(root / "cls_sm"), head="classifier", seq_length=64)
  export.export_from_model_dir(str(root / "enc"), str(root / "enc_sm"), head="encoder", seq_length=64)
  _prompted_encoder(tiny_model_dirs.copy("encoder", root / "enc_q"))
  export.export_from_model_dir(str(root / "enc_q"), str(root / "enc_q_sm"), head="encoder", seq_length=64)
  save_pretrained(build_model("span", AlbertConfig(**TINY)), str(root / "qa"), spm_model_file=spm_model_file)
  tagger = build_model("token_classifier", AlbertConfig(**TINY), len(TAGS))
  tagger.classifier.output_weights.assign(  # spread the logits so that the words get different labels
      20 * rng.normal(size=tagger.classifier.output_weights.shape).astype("float32"))
  save_pretrained(tagger, str(root / "tag"), spm_model_file=spm_model_file)
  (root / "tag" / "labels.json").write_text(json.dumps({"task": "tagging", "labels": TAGS}))
  save_pretrained(build_model("classifier", AlbertConfig(**TINY), 1), str(root / "reg"), spm_model_file=spm_model_file)
  save_pretrained(build_model("multiple_choice", AlbertConfig(**TINY)), str(root / "mc"), spm_model_file=spm_model_file)
  save_pretrained(build_model("pretrainer", AlbertConfig(**TINY)), str(root / "mlm"), spm_model_file=spm_model_file)
  out = {"cls": str(root / "cls"), "sm": str(root / "cls_sm"), "enc": str(root / "enc"), "enc_sm": str(root / "enc_sm"),
         "qa": str(root / "qa"), "tag": str(root / "tag"), "reg": str(root / "reg"), "mc": str(root / "mc"),
         "mlm": str(root / "mlm"), "enc_q": str(root / "enc_q"), "enc_q_sm": str(root / "enc_q_sm")}
  try:
    import openvino  # noqa: F401

    from official_albert.serving import openvino_export
  except ImportError:  # the OpenVINO extra is optional: its folders are then left out
    return out
  for name, head in (("cls", "classifier"), ("enc", "encoder"), ("enc_q", "encoder")):
    out[f"{name}_ov"] = openvino_export.export_openvino(out[name], str(root / f"{name}_ov"), head, "f32", seq_length=64)
  return out


def _prompted_encoder(folder):
  """Makes `folder` (the tiny encoder) a sentence-transformers folder whose texts are cut at 24 tokens and get the
  default prompt "query: " (config_sentence_transformers.json)."""
  modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
             {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
  files = {"modules.json": modules,
           "1_Pooling/config.json": {"pooling_mode_mean_tokens": True},
           "sentence_bert_config.json": {"max_seq_length": 24},
           "config_sentence_transformers.json": {"prompts": {"query": "query: "}, "default_prompt_name": "query"}}
  for name, data in files.items():
    path = pathlib.Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def expected(folders):
  """The in-process pipelines' answers on the same folders."""
  return {"cls": pipelines.classify(folders["cls"], TEXTS), "cls_pairs": pipelines.classify(folders["cls"], TEXTS,
                                                                                            text_pairs=PAIRS),
          "sm": pipelines.classify(folders["sm"], TEXTS), "sm_pairs": pipelines.classify(folders["sm"], TEXTS,
                                                                                         text_pairs=PAIRS),
          "enc": embedding.embed(folders["enc"], TEXTS), "enc_sm": embedding.embed(folders["enc_sm"], TEXTS),
          **({"cls_ov": pipelines.classify(folders["cls_ov"], TEXTS),
              "enc_ov": embedding.embed(folders["enc_ov"], TEXTS)} if "cls_ov" in folders else {})}


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class Server:
  """`python -m official_albert.serve` (or `module`, a wrapper of its main) in a child process; `url`, `proc`,
  `log()`."""

  def __init__(self, tmp_path, models, *flags, module="official_albert.serve", port=None):
    self.port = port or _free_port()
    self.url = f"http://127.0.0.1:{self.port}"
    self.log_path = tmp_path / f"server_{self.port}.log"
    args = [sys.executable, "-m", module, f"--port={self.port}"]
    for name, folder in models.items():
      args += [f"--model_dir={folder}", f"--model_name={name}"]
    env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2")
    with open(self.log_path, "wb") as log:
      self.proc = subprocess.Popen(args + list(flags), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)

  def log(self) -> str:
    return self.log_path.read_text(errors="replace")[-4000:]

  def wait_ready(self):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
      assert self.proc.poll() is None, f"server exited with {self.proc.returncode}:\n{self.log()}"
      try:
        if httpx.get(f"{self.url}/v2/health/ready", timeout=10).status_code == 200:
          return self
      except httpx.TransportError:
        pass
      time.sleep(0.5)
    raise AssertionError(f"not ready within {START_TIMEOUT_S} s:\n{self.log()}")

  def stop(self):
    if self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def server(folders, tmp_path_factory):
  # One thread per TensorFlow pool (TF Serving's flags), and a token budget that cuts the long texts' windows into
  # calls of 2-3 rows: every answer below must still equal the pipelines' (run here with TensorFlow's default pools
  # and whole batches) within their tolerances.
  s = Server(tmp_path_factory.mktemp("server"), folders, "--max_batch_size=8", "--batch_timeout_ms=20",
             "--max_batch_tokens=48",
             "--model_head=tag=token_classifier", "--model_head=mc=multiple_choice", "--model_head=mlm=fill_mask",
             "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=1")
  try:
    yield s.wait_ready()
  finally:
    s.stop()


def _post(url, body, timeout=REQUEST_TIMEOUT_S):
  data = body if isinstance(body, (bytes, str)) else json.dumps(body)
  return httpx.post(url, content=data, headers={"Content-Type": "application/json"}, timeout=timeout)


def _oip(texts, pairs=None):
  inputs = [{"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}]
  if pairs is not None:
    inputs.append({"name": "text_pair", "datatype": "BYTES", "shape": [len(pairs)], "data": pairs})
  return {"inputs": inputs}


def _outputs(answer):
  return {o["name"]: o for o in answer["outputs"]}


# ------------------------------------------------------------------------------------------------- the checks
def _check_oip_classify(answer, reference, indices):
  out = _outputs(answer)
  n = len(indices)
  assert out["label"]["datatype"] == "BYTES" and out["label"]["shape"] == [n]
  assert out["probabilities"]["datatype"] == "FP32" and out["probabilities"]["shape"] == [n, len(LABELS)]
  assert out["label"]["data"] == [reference[i]["label"] for i in indices]
  assert out["label_id"]["data"] == [reference[i]["label_id"] for i in indices]
  probabilities = np.asarray(out["probabilities"]["data"]).reshape(n, len(LABELS))
  want = np.asarray([[reference[i]["probabilities"][name] for name in LABELS] for i in indices])
  np.testing.assert_allclose(probabilities, want, atol=1e-5)


def _jobs(expected):
  """(description, method, path, body, check(response)) for every route, each several times."""
  jobs = []
  for start in range(len(TEXTS)):
    idx = [start, (start + 3) % len(TEXTS)] if start % 2 else [start]
    texts, pairs = [TEXTS[i] for i in idx], [PAIRS[i] for i in idx]
    for model in ("cls", "sm"):
      jobs.append((f"{model} {idx}", f"/v2/models/{model}/infer", _oip(texts),
                   lambda r, m=model, i=idx: _check_oip_classify(r.json(), expected[m], i)))
      jobs.append((f"{model} pairs {idx}", f"/v2/models/{model}/infer", _oip(texts, pairs),
                   lambda r, m=model, i=idx: _check_oip_classify(r.json(), expected[m + "_pairs"], i)))
    for model in [m for m in ("enc", "enc_ov", "enc_sm") if m in expected]:
      jobs.append((f"{model} embeddings {idx}", "/v1/embeddings", {"model": model, "input": texts},
                   lambda r, m=model, i=idx: np.testing.assert_allclose(
                       [d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"])],
                       expected[m][i], atol=1e-5)))
    normalize = start % 2 == 0  # TEI's /embed: unit vectors by default, the model's own with normalize=false
    jobs.append((f"enc tei embed {idx}", "/embed", {"model": "enc", "inputs": texts, "normalize": normalize},
                 lambda r, i=idx, n=normalize: np.testing.assert_allclose(
                     r.json(), expected["enc"][i] / (np.linalg.norm(expected["enc"][i], axis=-1, keepdims=True)
                                                     if n else 1.0), atol=1e-5)))
    jobs.append((f"enc_sm oip {idx}", "/v2/models/enc_sm/infer", _oip(texts),
                 lambda r, i=idx: np.testing.assert_allclose(
                     np.reshape(_outputs(r.json())["sentence_embedding"]["data"], (len(i), -1)), expected["enc_sm"][i],
                     atol=1e-5)))
    if "cls_ov" in expected:
      jobs.append((f"cls_ov {idx}", "/v2/models/cls_ov/infer", _oip(texts),
                   lambda r, i=idx: _check_oip_classify(r.json(), expected["cls_ov"], i)))
    jobs.append((f"tfs rows {idx}", "/v1/models/cls:predict", {"instances": [{"text": t} for t in texts]},
                 lambda r, i=idx: _check_tfs_rows(r.json(), expected["cls"], i)))
    for model in ("enc", "enc_sm"):
      jobs.append((f"{model} tfs columns {idx}", f"/v1/models/{model}:predict", {"inputs": {"text": texts}},
                   lambda r, m=model, i=idx: np.testing.assert_allclose(r.json()["outputs"], expected[m][i],
                                                                        atol=1e-5)))
    jobs.append((f"rerank {start}", "/rerank", {"model": "cls", "query": TEXTS[start], "texts": PAIRS},
                 lambda r, s=start: _check_rerank(r.json(), TEXTS[s])))
  return jobs


def _check_tfs_rows(answer, reference, indices):
  rows = answer["predictions"]
  assert [row["label"] for row in rows] == [reference[i]["label"] for i in indices]
  np.testing.assert_allclose([row["probabilities"] for row in rows],
                             [[reference[i]["probabilities"][n] for n in LABELS] for i in indices], atol=1e-5)


_RERANK_REFERENCE = {}


def _check_rerank(answer, query):
  want = _RERANK_REFERENCE[query]
  assert [a["index"] for a in answer] == [i for i, _ in want]
  np.testing.assert_allclose([a["score"] for a in answer], [s for _, s in want], atol=1e-5)


def _run_concurrently(fn, items, workers):
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    return list(pool.map(fn, items))


@pytest.mark.slow
def test_routes_answer_as_the_pipelines_at_concurrency_16(server, folders, expected):
  for query in TEXTS:  # the rerank rule: the probability of the last label, best first (ties: request order)
    scores = [r["probabilities"][LABELS[-1]] for r in pipelines.classify(folders["cls"], [query] * len(PAIRS),
                                                                         text_pairs=PAIRS)]
    _RERANK_REFERENCE[query] = sorted(enumerate(scores), key=lambda p: (-p[1], p[0]))
  jobs = _jobs(expected) * 2

  def call(job):
    description, path, body, check = job
    response = _post(server.url + path, body)
    assert response.status_code == 200, (description, response.text)
    check(response)
    return description

  assert len(_run_concurrently(call, jobs, 16)) == len(jobs)
  metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
  # Batching happened: some model call took more than one request's texts (16 clients, a 20 ms window).
  sizes = {line.split('le="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
           if line.startswith('albert_batch_size_bucket{le=') and 'model="cls"' in line}
  assert sizes["+Inf"] > 0 and 'albert_requests_total{route="/rerank",status="200"}' in metrics


def test_metadata_base64_embeddings_and_usage(server, expected):
  meta = httpx.get(f"{server.url}/v2/models/cls", timeout=30).json()
  assert [i["name"] for i in meta["inputs"]] == ["text", "text_pair", "input_word_ids", "input_mask", "input_type_ids"]
  assert {o["name"]: o["shape"] for o in meta["outputs"]}["probabilities"] == [-1, 2]
  assert httpx.get(f"{server.url}/v2/models/enc/ready", timeout=30).json() == {"name": "enc", "ready": True}
  answer = _post(f"{server.url}/v1/embeddings", {"model": "enc", "input": TEXTS[0], "encoding_format": "base64"})
  assert answer.status_code == 200, answer.text
  body = answer.json()
  vector = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), "<f4")
  np.testing.assert_allclose(vector, expected["enc"][0], atol=1e-5)
  assert body["object"] == "list" and body["model"] == "enc" and body["usage"]["prompt_tokens"] > 2
  # An encoder SavedModel: text in (its `embed` signature tokenizes), the vector as `embed` gives it on the folder.
  meta = httpx.get(f"{server.url}/v2/models/enc_sm", timeout=30).json()
  assert meta["platform"] == "official_albert_saved_model" and [i["name"] for i in meta["inputs"]] == ["text"]
  assert meta["outputs"] == [{"name": "sentence_embedding", "datatype": "FP32",
                              "shape": [-1, tiny.MODEL["hidden_size"]]}]
  answer = _post(f"{server.url}/v1/embeddings", {"model": "enc_sm", "input": TEXTS[0], "encoding_format": "base64"})
  assert answer.status_code == 200, answer.text
  vector = np.frombuffer(base64.b64decode(answer.json()["data"][0]["embedding"]), "<f4")
  np.testing.assert_allclose(vector, expected["enc_sm"][0], atol=1e-5)
  assert answer.json()["usage"]["prompt_tokens"] > 2
  # `usage` counts the packed tokens: a text longer than the 64 positions counts 64, as it is cut (every backend).
  for model in ["enc", "enc_sm"] + (["enc_ov"] if "enc_ov" in expected else []):
    short = _post(f"{server.url}/v1/embeddings", {"model": model, "input": "a"}).json()["usage"]["prompt_tokens"]
    long = _post(f"{server.url}/v1/embeddings", {"model": model, "input": ["the cat sat on the mat " * 20, "a"]})
    assert long.status_code == 200 and long.json()["usage"]["prompt_tokens"] == 64 + short, (model, long.text)
  ids = _post(f"{server.url}/v2/models/enc_sm/infer", _oip_ids([([2, 5, 3], [1, 1, 1], [0, 0, 0])]))
  assert ids.status_code == 400 and "takes text, not token ids" in ids.json()["error"], ids.text


def test_usage_counts_the_prompt_the_model_saw(server, folders):
  """An encoder with a default prompt embeds the prompt's and the text's tokens (every backend): `usage` counts those
  (it counted the text alone), cut at the length the text is packed into — the folder's max_seq_length 24, which the
  SavedModel's `embed` packs at below its --seq_length 64 (it counted up to 64)."""
  tokenizer = embedding.load_embedder(folders["enc_q"])[1]
  count = lambda text: min(len(tokenizer.encode_ids("query: " + text)) + 2, 24)  # noqa: E731
  long = "the cat sat on the mat " * 20
  for model in [m for m in ("enc_q", "enc_q_sm", "enc_q_ov") if m in folders]:
    answer = _post(f"{server.url}/v1/embeddings", {"model": model, "input": ["a", TEXTS[0], long]})
    assert answer.status_code == 200, (model, answer.text)
    body = answer.json()
    assert body["usage"] == {"prompt_tokens": count("a") + count(TEXTS[0]) + 24,
                             "total_tokens": count("a") + count(TEXTS[0]) + 24}, (model, count("a"))
    np.testing.assert_allclose([d["embedding"] for d in body["data"]],
                               embedding.embed(folders[model], ["a", TEXTS[0], long]), atol=1e-5)


# 4xx answers the server must give (with an `error` that names the field), whatever else is going on.
BAD = [
    ("/v2/models/cls/infer", b"{not json", 400, "invalid JSON"),
    ("/v2/models/cls/infer", b"", 400, "empty request body"),
    ("/v2/models/cls/infer", [1, 2], 400, "JSON object"),
    ("/v2/models/cls/infer", {}, 400, "inputs"),
    ("/v2/models/cls/infer", {"inputs": []}, 400, "inputs"),
    ("/v2/models/cls/infer", {"inputs": [{"name": "text", "datatype": "INT32", "shape": [1], "data": [1]}]}, 400,
     "datatype"),
    ("/v2/models/cls/infer", {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [3], "data": ["a"]}]}, 400,
     "shape"),
    ("/v2/models/cls/infer", {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [0], "data": []}]}, 400,
     "data"),
    ("/v2/models/cls/infer", {"inputs": [{"name": "txt", "datatype": "BYTES", "shape": [1], "data": ["a"]}]}, 400,
     "name"),
    ("/v2/models/cls/infer", {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": [7]}]}, 400,
     "expected a string"),
    ("/v2/models/cls/infer", _oip(["a"] * 33), 413, "limit"),
    ("/v2/models/nope/infer", _oip(["a"]), 404, "not served"),
    ("/v1/embeddings", {"model": "enc"}, 400, "input"),
    ("/v1/embeddings", {"model": "cls", "input": "a"}, 400, "classifier"),
    ("/v1/embeddings", {"model": "enc", "input": "a", "encoding_format": "int8"}, 400, "encoding_format"),
    ("/rerank", {"model": "cls", "texts": ["a"]}, 400, "query"),
    ("/embed", {"model": "enc"}, 400, "inputs: missing"),
    ("/embed", {"model": "cls", "inputs": "a"}, 400, "classifier"),
    ("/embed", {"model": "enc", "inputs": "a", "truncate": False}, 400, "truncate"),
    ("/embed", {"model": "enc", "inputs": "a", "normalize": "yes"}, 400, "normalize"),
    ("/embed", {"model": "enc", "inputs": "a", "prompt_name": "query"}, 400, "prompt_name: not a field of /embed"),
    ("/v1/models/cls:predict", {"instances": []}, 400, "instances"),
    ("/v2/models/enc/infer", _oip(["a"], ["b"]), 400, "text_pair"),
    # A lone surrogate (valid JSON "\ud800", no Unicode text) on every route that takes text: 400 naming it.
    ("/v2/models/cls/infer", _oip(["ok", "a\ud800b"]), 400, "inputs[0].data[1]: not valid Unicode text"),
    ("/v2/models/sm/infer", _oip(["a"], ["b\udfff"]), 400, "inputs[1].data[0]: not valid Unicode text"),
    ("/v1/embeddings", {"model": "enc", "input": "a\ud800"}, 400, "input[0]: not valid Unicode text"),
    ("/v1/models/cls:predict", {"instances": ["a\ud800"]}, 400, "instances[0]: not valid Unicode text"),
    ("/rerank", {"model": "cls", "query": "q", "texts": ["\ud800"]}, 400, "texts[0]: not valid Unicode text"),
    ("/v2/models/qa/infer", {"inputs": [{"name": "question", "datatype": "BYTES", "shape": [1], "data": ["\ud800?"]},
                                        {"name": "context", "datatype": "BYTES", "shape": [1], "data": ["c"]}]}, 400,
     "inputs[0].data[0]: not valid Unicode text"),
    ("/v2/models/cls/infer", {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a"]}],
                              "id": "\ud800"}, 400, "id: not valid Unicode text"),
    ("/v2/models/cls/infer", '{"inputs": ' + "[" * 100_000 + "]" * 100_000 + "}", 400, "too deeply nested"),
    # Nested data must be nested as the shape says; dimensions are non-negative integers.
    ("/v2/models/cls/infer", {"inputs": [{"name": "input_word_ids", "datatype": "INT32", "shape": [1, 5],
                                          "data": [[2, 5, 3], [2, 3]]}]}, 400, "the shape does not match the data"),
    ("/v2/models/cls/infer", {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": [["a", "b"]]}]},
     400, "the shape does not match the data"),
    ("/v2/models/cls/infer", {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [True], "data": ["a"]}]}, 400,
     "inputs[0].shape"),
    ("/v2/models/mc/infer", {"inputs": [{"name": "context", "datatype": "BYTES", "shape": [2], "data": ["c", "c"]},
                                        {"name": "question", "datatype": "BYTES", "shape": [2], "data": ["q", "q"]},
                                        {"name": "choices", "datatype": "BYTES", "shape": [2, 2],
                                         "data": [["a", "b", "c"], ["d"]]}]}, 400, "the shape does not match the data"),
    ("/v2/models/mc/infer", {"inputs": [{"name": "context", "datatype": "BYTES", "shape": [1], "data": ["c"]},
                                        {"name": "question", "datatype": "BYTES", "shape": [1], "data": ["q"]},
                                        {"name": "choices", "datatype": "BYTES", "shape": [1, -4],
                                         "data": ["a", "b", "c", "d"]}]}, 400, "inputs[2].shape: [1, -4]"),
    ("/v1/models/cls:predict", {"signature_name": "nope", "instances": ["a"]}, 400, "signature_name: 'nope'"),
    ("/v1/models/cls:predict", {"instances": [{"text": "a", "text_pair": "b", "text_b": "c"}]}, 400,
     "instances[0]: both text_pair and text_b"),
    ("/rerank", {"model": "cls", "query": "q", "texts": ["a"], "return_text": "no"}, 400, "return_text:"),
]


def test_malformed_requests_among_good_ones(server, expected):
  """50 bad requests (every one of BAD) interleaved with good ones: each bad one 4xx with an error, each good one
  right, still ready."""
  assert len(BAD) <= 50
  items = [("bad", BAD[i % len(BAD)]) for i in range(50)] + [("good", i) for i in range(50)]
  items = [items[(i * 37) % len(items)] for i in range(len(items))]  # interleaved (37 is prime to 100)

  def call(item):
    kind, what = item
    if kind == "good":
      i = what % len(TEXTS)
      response = _post(f"{server.url}/v2/models/cls/infer", _oip([TEXTS[i]]))
      assert response.status_code == 200, response.text
      _check_oip_classify(response.json(), expected["cls"], [i])
      return
    path, body, status, words = what
    response = _post(server.url + path, body)
    assert response.status_code == status, (path, body, response.status_code, response.text)
    assert words in response.json()["error"], (path, body, response.json())

  _run_concurrently(call, items, 8)
  assert httpx.get(f"{server.url}/v2/health/ready", timeout=30).status_code == 200
  assert httpx.get(f"{server.url}/nothing/here", timeout=30).json()["error"].startswith("Not Found")


def test_tf_serving_signature_names(server, expected):
  """:predict takes TF Serving's default signature name, and a SavedModel's own text signatures, each with its own
  inputs; the refusal of another names the ones served."""
  for model, signature in (("cls", "serving_default"), ("sm", "serving_default"), ("sm", "serve_text"),
                           ("enc_sm", "embed")):
    answer = _post(f"{server.url}/v1/models/{model}:predict", {"signature_name": signature, "instances": ["a"]})
    assert answer.status_code == 200, (model, signature, answer.text)
  refused = _post(f"{server.url}/v1/models/sm:predict", {"signature_name": "from_ids", "instances": ["a"]})
  assert refused.status_code == 400 and "['serving_default', 'serve_text', 'serve_text_pair']" in refused.json()[
      "error"], refused.text
  # The signature decides the inputs, as the SavedModel's do: serve_text takes text alone, serve_text_pair a pair.
  for signature, row, words in (("serve_text", {"text": "a", "text_b": "b"}, "takes the inputs ['text'] per row"),
                                ("serve_text_pair", {"text": "a"}, "text_b: missing;")):
    refused = _post(f"{server.url}/v1/models/sm:predict", {"signature_name": signature, "instances": [row]})
    assert refused.status_code == 400 and words in refused.json()["error"], refused.text
  pair = _post(f"{server.url}/v1/models/sm:predict", {"signature_name": "serve_text_pair",
                                                      "instances": [{"text": TEXTS[0], "text_b": PAIRS[0]}]})
  assert pair.status_code == 200, pair.text
  assert pair.json()["predictions"][0]["label"] == expected["sm_pairs"][0]["label"]
  # OIP's `"outputs": []` is every output, as absent is (and as gRPC answers a request without outputs).
  every = [_post(f"{server.url}/v2/models/sm/infer", {**_oip(TEXTS[:1]), **extra}).json()["outputs"]
           for extra in ({}, {"outputs": []})]
  assert [t["name"] for t in every[0]] == [t["name"] for t in every[1]] and {"label", "probabilities"} <= {
      t["name"] for t in every[1]}, every


def _wait_exit(proc, timeout_s=180):
  try:
    return proc.wait(timeout=timeout_s)
  except subprocess.TimeoutExpired:
    proc.kill()
    raise AssertionError(f"the server did not exit within {timeout_s} s")


def post_while_draining(url, body, n, sent_term):
  """POSTs request `n` to a server that may be sent SIGTERM meanwhile: its answer (status 200, JSON), or None when it
  was refused — a closed connection, or 503 with an error — which is allowed only once SIGTERM was sent."""
  try:
    response = httpx.post(url, json=body, timeout=REQUEST_TIMEOUT_S)
  except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError) as e:  # closed: refused, not lost
    assert sent_term.is_set(), f"request {n}: {e!r} before SIGTERM"
    return None
  if response.status_code == 503:
    assert sent_term.is_set() and "error" in response.json(), response.text
    return None
  assert response.status_code == 200, response.text
  return response.json()


def sigterm_under_load(server, send, requests, sigterm_after, concurrency=8):
  """The drain check: `send(n, sent_term)` for n in range(requests) at `concurrency`, SIGTERM to the server after the
  `sigterm_after`-th answer. `send` checks request n's answer and returns True, or returns False for a refusal (which
  it asserts came after SIGTERM). Then: SIGTERM was sent, every request returned (none lost or hung), at least
  `sigterm_after` were answered, and the server exits 0. Stops the server in any case."""
  answered, lock, sent_term = [0], threading.Lock(), threading.Event()

  def call(n):
    if not send(n, sent_term):
      return "refused"
    with lock:
      answered[0] += 1
      if answered[0] == sigterm_after:
        sent_term.set()  # before the signal: a refusal seen by another thread in between is then allowed
        server.proc.send_signal(signal.SIGTERM)
    return "ok"

  try:
    outcomes = _run_concurrently(call, range(requests), concurrency)
    assert sent_term.is_set() and outcomes.count("ok") >= sigterm_after and len(outcomes) == requests
    assert _wait_exit(server.proc) == 0, server.log()
  finally:
    server.stop()


@pytest.mark.slow
@pytest.mark.timing
def test_sigterm_under_load_loses_no_request(folders, expected, tmp_path):
  """200 requests at concurrency 8, SIGTERM after the 100th answer: each answered right or refused (503 or no
  connection), none lost or hung; exit code 0."""
  server = Server(tmp_path, {"cls": folders["cls"]}, "--drain_seconds=2", "--max_batch_size=8").wait_ready()

  def send(n, sent_term):
    i = n % len(TEXTS)
    answer = post_while_draining(f"{server.url}/v2/models/cls/infer", _oip([TEXTS[i]]), n, sent_term)
    if answer is not None:
      _check_oip_classify(answer, expected["cls"], [i])
    return answer is not None

  sigterm_under_load(server, send, requests=200, sigterm_after=100)


@pytest.mark.slow
@pytest.mark.timing
def test_a_full_queue_answers_503_with_retry_after(folders, tmp_path):
  server = Server(tmp_path, {"cls": folders["cls"]}, "--max_queue=2", "--max_batch_size=1", "--batch_timeout_ms=0",
                  "--max_inputs=64").wait_ready()
  try:
    def call(_):
      response = _post(f"{server.url}/v2/models/cls/infer", _oip(TEXTS * 6))  # 60 texts: 60 model calls
      assert response.status_code in (200, 503), response.text
      if response.status_code == 503:
        assert response.headers.get("retry-after") and "queue is full" in response.json()["error"]
      return response.status_code

    statuses = []
    for _ in range(5):  # bounded: a burst of 24 at once leaves some waiting; stop at the first refusal
      statuses += _run_concurrently(call, range(24), 24)
      if 503 in statuses:
        break
    assert 503 in statuses and 200 in statuses, statuses
    assert httpx.get(f"{server.url}/v2/health/ready", timeout=30).status_code == 200
  finally:
    server.stop()


def test_the_thread_flags_reach_tensorflow(server):
  from official_albert import serve
  from official_albert.serving import served_model
  assert "TensorFlow threads: intra-op 1, inter-op 1" in server.log_path.read_text(errors="replace")
  with pytest.raises(served_model.ModelLoadError, match="tensorflow_inter_op_parallelism=-2"):
    serve.configure_tensorflow_threads(0, -2)


def test_the_server_runs_frozen_weight_kernels_unless_the_environment_says(server):
  # On by default (a server never assigns its weights; the equivalence tests above ran with it), off with
  # --nofrozen_weight_kernels, and an operator's own value of the variable is kept either way.
  from official_albert import precision
  from official_albert import serve
  assert "Frozen-weight oneDNN kernels: on" in server.log_path.read_text(errors="replace")
  name = precision.FROZEN_WEIGHTS_ENV
  for enabled, preset, expected in ((True, None, "1"), (False, None, "0"), (True, "0", "0"), (False, "1", "1")):
    environ = {} if preset is None else {name: preset}
    serve.configure_frozen_weight_kernels(enabled, environ)
    assert environ == {name: expected}, (enabled, preset)


@pytest.mark.slow
def test_a_folder_that_cannot_load_stops_start_up(folders, tmp_path):
  broken = tmp_path / "broken"
  broken.mkdir()
  (broken / "config.json").write_text("{}")
  server = Server(tmp_path, {"cls": folders["cls"], "broken": str(broken)})
  try:
    assert _wait_exit(server.proc, START_TIMEOUT_S) != 0
    assert str(broken) in server.log() and "cannot start" in server.log(), server.log()
  finally:
    server.stop()


def _documented_requests():
  """The curl lines of docs/serving.md's bash blocks: (method, path, body or None)."""
  import re
  import shlex
  text = (REPO_ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
  requests = []
  for body in re.findall(r"```bash\n(.*?)```", text, re.S):
    for line in body.replace("\\\n", " ").splitlines():
      if not line.startswith("curl "):
        continue
      words = shlex.split(line)
      url = next(w for w in words if w.startswith("localhost:8080/"))
      data = words[words.index("-d") + 1] if "-d" in words else None
      requests.append(("POST" if data is not None else "GET", url[len("localhost:8080"):], data))
  return requests


def test_the_documented_requests(server):
  """docs/serving.md's examples, sent as written (its model names mapped to this server's), all answer 200."""
  requests = _documented_requests()
  assert {path.split("/")[1] for _, path, _ in requests} >= {"v2", "v1", "rerank", "metrics"}
  rename = lambda s: s.replace("mrpc", "cls").replace("embedder", "enc").replace("squad", "qa").replace(
      "tagger", "tag").replace("race", "mc").replace("fillmask", "mlm")
  for method, path, data in requests:
    response = httpx.request(method, server.url + rename(path), content=None if data is None else rename(data),
                             timeout=REQUEST_TIMEOUT_S)
    assert response.status_code == 200, (path, data, response.text)


@pytest.mark.parametrize("model", ["enc", "enc_sm"])
def test_openai_dimensions_serve_a_trained_matryoshka_width_and_refuse_others(server, folders, model):
  """`dimensions` (OpenAI's) answers as `embed(folder, texts, dim=K)`: the first K dimensions re-normalised, for a
  width the directory was trained at (a SavedModel export: the widths its directory recorded); another width is
  refused naming the trained ones."""
  answer = _post(f"{server.url}/v1/embeddings", {"model": model, "input": TEXTS, "dimensions": 16})
  assert answer.status_code == 200, answer.text
  vectors = np.asarray([d["embedding"] for d in answer.json()["data"]])
  np.testing.assert_allclose(vectors, embedding.embed(folders[model], TEXTS, dim=16), atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=1e-5)
  refused = _post(f"{server.url}/v1/embeddings", {"model": model, "input": TEXTS[:2], "dimensions": 8})
  assert refused.status_code == 400, refused.text
  assert refused.json()["error"].startswith("dimensions:") and "[32, 16]" in refused.json()["error"]
  bad = _post(f"{server.url}/v1/embeddings", {"model": "enc", "input": "a", "dimensions": "16"})
  assert bad.status_code == 400 and bad.json()["error"].startswith("dimensions:")
  assert httpx.get(f"{server.url}/v2/health/ready", timeout=REQUEST_TIMEOUT_S).status_code == 200


# ------------------------------------------------------------------------------ token ids and the task heads (OIP)
ID_ROWS = [([2, 15, 27, 3], [1, 1, 1, 1], [0, 0, 0, 0]), ([2, 40, 3, 9, 3, 0], [1, 1, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0]),
           ([2, 3], [1, 1], [0, 0]), ([2, 999, 500, 7, 8, 3], [1] * 6, [0] * 6)]


def _oip_ids(rows):
  """An OIP body of token ids: every row of `rows` (equal lengths), nested data for ids, flat for the rest."""
  shape = [len(rows), len(rows[0][0])]
  return {"inputs": [{"name": "input_word_ids", "datatype": "INT32", "shape": shape, "data": [r[0] for r in rows]},
                     {"name": "input_mask", "datatype": "INT32", "shape": shape,
                      "data": [x for r in rows for x in r[1]]},
                     {"name": "input_type_ids", "datatype": "INT32", "shape": shape,
                      "data": [x for r in rows for x in r[2]]}]}


def test_token_ids_over_oip_answer_as_the_model_on_the_same_ids(server, folders):
  """input_word_ids (with input_mask, input_type_ids) at concurrency 8, rows of different lengths batched together:
  each answer equals the directory's model called in process on that request's ids."""
  import tensorflow as tf
  models = {"cls": pipelines.resolve_model(folders["cls"], "classifier", None, True, "hf")[0],
            "enc": embedding.load_embedder(folders["enc"])[0]}
  for name in ("cls_ov", "enc_ov"):  # the OpenVINO exports (their IR called in process on the same ids)
    if name in folders:
      export_folder = pipelines.open_export_folder(folders[name])
      models[name] = lambda inputs, training=False, m=export_folder: m(inputs)
  jobs = [(name, [row]) for name in models for row in ID_ROWS] + [("cls", ID_ROWS[:1] * 3), ("enc", ID_ROWS[3:] * 2)]
  reference_lock = threading.Lock()

  def call(job):
    name, rows = job
    response = _post(f"{server.url}/v2/models/{name}/infer", _oip_ids(rows))
    assert response.status_code == 200, response.text
    out = _outputs(response.json())
    inputs = {k: tf.constant(np.asarray([r[i] for r in rows], np.int32))
              for i, k in enumerate(("input_word_ids", "input_mask", "input_type_ids"))}
    with reference_lock:  # (the in-process reference: an OpenVINO infer request runs one call at a time)
      alone = models[name](inputs, training=False)
    if name.startswith("enc"):
      assert out["sentence_embedding"]["shape"] == [len(rows), 32]
      np.testing.assert_allclose(np.reshape(out["sentence_embedding"]["data"], (len(rows), -1)),
                                 alone["sentence_embedding"], atol=1e-5)
      return
    probabilities = tf.nn.softmax(alone["logits"], axis=-1).numpy()
    np.testing.assert_allclose(np.reshape(out["probabilities"]["data"], (len(rows), -1)), probabilities, atol=1e-5)
    assert out["label"]["data"] == [LABELS[int(i)] for i in np.argmax(probabilities, -1)]

  _run_concurrently(call, jobs * 2, 8)
  meta = httpx.get(f"{server.url}/v2/models/cls", timeout=30).json()
  assert [i["name"] for i in meta["inputs"]] == ["text", "text_pair", "input_word_ids", "input_mask", "input_type_ids"]
  assert [i["name"] for i in httpx.get(f"{server.url}/v2/models/sm", timeout=30).json()["inputs"]] == ["text",
                                                                                                       "text_pair"]


QUESTIONS = ["who sat on the mat?", "where is Paris?", "what crashes?"]
CONTEXTS = ["the cat sat on the mat", "Paris is in France.", "it crashes on start, every single time I open it"]


def _check_qa(answer, want):
  out = _outputs(answer)
  assert (out["answer"]["datatype"], out["score"]["datatype"], out["start"]["datatype"]) == ("BYTES", "FP32", "INT64")
  assert out["answer"]["data"] == [a["answer"] for a in want]
  assert out["start"]["data"] == [a["start"] for a in want] and out["end"]["data"] == [a["end"] for a in want]
  np.testing.assert_allclose(out["score"]["data"], [a["score"] for a in want], atol=1e-5)


def _check_words(answer, want):
  (words,) = answer["outputs"]
  assert words["name"] == "words" and words["datatype"] == "BYTES" and words["shape"] == [len(want)]
  got = [json.loads(w) for w in words["data"]]
  assert [[(w["word"], w["start"], w["end"], w["label"]) for w in r] for r in got] == [
      [(w["word"], w["start"], w["end"], w["label"]) for w in r] for r in want]
  np.testing.assert_allclose([w["score"] for r in got for w in r], [w["score"] for r in want for w in r], atol=1e-5)


def test_question_answering_and_tagging_over_oip_answer_as_their_pipelines(server, folders):
  """question + context (QA) and text (tagging) at concurrency 8: each answer equals the task pipeline called in
  process on the same folder with its default windows (fitted to the model's 64 positions)."""
  from official_albert.serving import task_pipelines
  qa = task_pipelines.question_answering(folders["qa"], QUESTIONS, CONTEXTS)
  tags = task_pipelines.token_classification(folders["tag"], TEXTS)
  assert len({w["label"] for r in tags for w in r}) > 1  # (the check below compares more than one label)
  jobs = []
  for i in range(len(QUESTIONS)):
    idx = [i, (i + 1) % len(QUESTIONS)] if i % 2 else [i]
    body = {"inputs": [{"name": name, "datatype": "BYTES", "shape": [len(idx)], "data": [values[k] for k in idx]}
                       for name, values in (("question", QUESTIONS), ("context", CONTEXTS))]}
    jobs.append(("/v2/models/qa/infer", body, lambda r, idx=idx: _check_qa(r.json(), [qa[k] for k in idx])))
  for i in range(len(TEXTS)):
    idx = [i, (i + 3) % len(TEXTS)] if i % 2 else [i]
    jobs.append(("/v2/models/tag/infer", _oip([TEXTS[k] for k in idx]),
                 lambda r, idx=idx: _check_words(r.json(), [tags[k] for k in idx])))

  def call(job):
    path, body, check = job
    response = _post(server.url + path, body)
    assert response.status_code == 200, (path, response.text)
    check(response)

  _run_concurrently(call, jobs * 2, 8)
  meta = httpx.get(f"{server.url}/v2/models/qa", timeout=30).json()
  assert [(i["name"], i["datatype"]) for i in meta["inputs"]] == [("question", "BYTES"), ("context", "BYTES")]
  assert [o["name"] for o in meta["outputs"]] == ["answer", "score", "start", "end"]
  meta = httpx.get(f"{server.url}/v2/models/tag", timeout=30).json()
  assert [i["name"] for i in meta["inputs"]] == ["text"] and meta["outputs"][0]["name"] == "words"


_IDS = {"name": "input_word_ids", "datatype": "INT32", "shape": [1, 3], "data": [2, 5, 3]}
BAD_HEADS = [
    ("/v2/models/cls/infer", {"inputs": [_IDS, _oip(["a"])["inputs"][0]]}, "not both"),
    ("/v2/models/cls/infer", {"inputs": [{**_IDS, "datatype": "FP32"}]}, "datatype"),
    ("/v2/models/cls/infer", {"inputs": [{**_IDS, "shape": [3]}]}, "shape"),
    ("/v2/models/enc/infer", {"inputs": [{**_IDS, "data": [2, 1000, 3]}]}, "outside the vocabulary [0, 1000)"),
    ("/v2/models/cls/infer", {"inputs": [{**_IDS, "shape": [1, 65], "data": [5] * 65}]}, "64 positions"),
    ("/v2/models/sm/infer", {"inputs": [_IDS]}, "takes text, not token ids"),
    ("/v2/models/qa/infer", _oip(["a"]), "'text' is not an input of this model; its inputs are ['question', "),
    ("/v2/models/qa/infer", {"inputs": [{"name": "question", "datatype": "BYTES", "shape": [1], "data": ["a"]}]},
     "missing ['context']"),
    ("/v2/models/tag/infer", {"inputs": [_IDS]}, "takes text, not token ids"),
    ("/v2/models/tag/infer", _oip(["a"], ["b"]), "'text_pair' is not an input"),
    ("/v1/models/qa:predict", {"instances": ["a"]}, "/v2/models/qa/infer"),
]


def test_malformed_token_id_and_head_requests_name_the_field(server, expected):
  """Each refused 400 with the field and the fix, interleaved with good requests, the server still ready."""
  def call(item):
    if item is None:
      response = _post(f"{server.url}/v2/models/cls/infer", _oip([TEXTS[0]]))
      assert response.status_code == 200, response.text
      _check_oip_classify(response.json(), expected["cls"], [0])
      return
    path, body, words = item
    response = _post(server.url + path, body)
    assert response.status_code == 400 and words in response.json()["error"], (path, response.text)

  _run_concurrently(call, [x for bad in BAD_HEADS for x in (bad, None)], 8)
  assert httpx.get(f"{server.url}/v2/health/ready", timeout=30).status_code == 200


def test_a_regression_head_answers_its_score_as_classify(server, folders):
  """A one-output classifier over OIP (text and pairs) and /rerank: `score` equals classify's on the same folder."""
  want = [r["score"] for r in pipelines.classify(folders["reg"], TEXTS, text_pairs=PAIRS)]
  response = _post(f"{server.url}/v2/models/reg/infer", _oip(TEXTS, PAIRS))
  assert response.status_code == 200, response.text
  (score,) = response.json()["outputs"]
  assert (score["name"], score["datatype"], score["shape"]) == ("score", "FP32", [len(TEXTS)])
  np.testing.assert_allclose(score["data"], want, atol=1e-5)
  scores = [r["score"] for r in pipelines.classify(folders["reg"], [TEXTS[0]] * len(PAIRS), text_pairs=PAIRS)]
  ranked = _post(f"{server.url}/rerank", {"model": "reg", "query": TEXTS[0], "texts": PAIRS}).json()
  order = [a["index"] for a in ranked]
  assert sorted(order) == list(range(len(PAIRS)))
  # Best first, each pair with its own score. (The server's graph and the one-shot eager call round differently in
  # the last bits: two pairs whose scores differ by less than that may come in either order.)
  np.testing.assert_allclose([a["score"] for a in ranked], [scores[i] for i in order], atol=1e-5)
  np.testing.assert_allclose([a["score"] for a in ranked], sorted(scores, reverse=True), atol=1e-5)
  meta = httpx.get(f"{server.url}/v2/models/reg", timeout=30).json()
  assert meta["outputs"] == [{"name": "score", "datatype": "FP32", "shape": [-1]}]


def test_multiple_choice_over_oip_answers_as_its_pipeline(server, folders):
  """context, question, choices [n, k] at concurrency 4 (4 and 2 choices, never in one call): each answer equals
  multiple_choice on the same folder with its default packing (fitted to the model's 64 positions)."""
  from official_albert.serving import task_pipelines
  contexts, questions = ["Tom has a red ball.", "The cat sat on the mat.", "Paris is in France."], [
      "Tom has a _ ball.", "Where did the cat sit?", "Where is Paris?"]
  four = [["red", "blue", "green", "big"], ["on the mat", "in a tree", "on a car", "in a box"],
          ["France", "Spain", "Italy", "Peru"]]
  two = [c[:2] for c in four]
  want = {4: task_pipelines.multiple_choice(folders["mc"], contexts, questions, four),
          2: task_pipelines.multiple_choice(folders["mc"], contexts, questions, two)}

  def call(job):
    k, i = job
    choices = (four if k == 4 else two)[i]
    body = {"inputs": [{"name": "context", "datatype": "BYTES", "shape": [1], "data": [contexts[i]]},
                       {"name": "question", "datatype": "BYTES", "shape": [1], "data": [questions[i]]},
                       {"name": "choices", "datatype": "BYTES", "shape": [1, k], "data": [choices]}]}
    response = _post(f"{server.url}/v2/models/mc/infer", body)
    assert response.status_code == 200, response.text
    out = _outputs(response.json())
    assert out["label"]["data"] == [want[k][i]["label"]] and out["choice"]["data"] == [want[k][i]["choice"]]
    assert out["scores"]["shape"] == [1, k]
    np.testing.assert_allclose(out["scores"]["data"], want[k][i]["scores"], atol=1e-5)

  _run_concurrently(call, [(k, i) for k in (4, 2) for i in range(3)] * 2, 4)
  one = {"inputs": [{"name": n, "datatype": "BYTES", "shape": s, "data": d} for n, s, d in (
      ("context", [1], ["a"]), ("question", [1], ["b"]), ("choices", [1, 1], ["c"]))]}
  refused = _post(f"{server.url}/v2/models/mc/infer", one)
  assert refused.status_code == 400 and refused.json()["error"].startswith("choices: 1 per row"), refused.text
  meta = httpx.get(f"{server.url}/v2/models/mc", timeout=30).json()
  assert [(i["name"], i["shape"]) for i in meta["inputs"]] == [("context", [-1]), ("question", [-1]),
                                                               ("choices", [-1, -1])]
  assert [o["name"] for o in meta["outputs"]] == ["label", "choice", "scores"]


def test_fill_mask_over_oip_answers_as_its_pipeline(server, folders):
  """text with [MASK]s at concurrency 4: each text's `predictions` (JSON) equals fill_mask on the same folder; a text
  without [MASK] is refused 400 naming it, the others in flight unharmed."""
  texts = ["the cat sat on the [MASK].", "[MASK] is in [MASK].", "a [MASK] film", "great [MASK]"]
  want = pipelines.fill_mask(folders["mlm"], texts)

  def call(i):
    if i is None:
      bad = _post(f"{server.url}/v2/models/mlm/infer", _oip(["a [MASK]", "no mask"]))
      assert bad.status_code == 400 and "text[1]: no [MASK] token" in bad.json()["error"], bad.text
      return
    response = _post(f"{server.url}/v2/models/mlm/infer", _oip([texts[i]]))
    assert response.status_code == 200, response.text
    (predictions,) = response.json()["outputs"]
    assert predictions["name"] == "predictions" and predictions["datatype"] == "BYTES"
    got = json.loads(predictions["data"][0])
    flat = lambda r: r if isinstance(r[0], dict) else [p for mask in r for p in mask]  # noqa: E731
    assert [(p["token"], p["sequence"]) for p in flat(got)] == [(p["token"], p["sequence"]) for p in flat(want[i])]
    np.testing.assert_allclose([p["score"] for p in flat(got)], [p["score"] for p in flat(want[i])], atol=1e-5)

  _run_concurrently(call, [0, 1, None, 2, 3, None] * 2, 4)
  assert httpx.get(f"{server.url}/v2/models/mlm", timeout=30).json()["inputs"] == [
      {"name": "text", "datatype": "BYTES", "shape": [-1]}]


# ------------------------------------------------------------------------- HTTP conformance (methods, paths, bodies)
def test_head_allow_versioned_paths_and_tf_serving_input_names(server, expected):
  """Every GET route answers HEAD as GET (no body); a 405 carries `Allow`; OIP's versioned paths (and TF Serving's)
  answer as the unversioned ones for version "1" and 404 naming another, as gRPC's model_version; TF Serving's
  :predict refuses an input name the model does not take (a second segment under another name), rows and columns."""
  for path in ("/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/cls", "/v2/models/cls/ready", "/metrics",
               "/v2/models/cls/versions/1", "/v2/models/cls/versions/1/ready"):
    head = httpx.head(server.url + path, timeout=REQUEST_TIMEOUT_S)
    assert head.status_code == 200 and head.content == b"", (path, head.status_code, head.text)
  refused = httpx.get(f"{server.url}/v1/embeddings", timeout=REQUEST_TIMEOUT_S)
  assert refused.status_code == 405 and refused.headers.get("allow") == "POST", (refused.headers, refused.text)
  refused = _post(f"{server.url}/v2/models/cls", {})
  assert refused.status_code == 405 and set(refused.headers["allow"].split(", ")) == {"GET", "HEAD"}, refused.headers

  answer = _post(f"{server.url}/v2/models/cls/versions/1/infer", _oip([TEXTS[0], TEXTS[3]]))
  assert answer.status_code == 200, answer.text
  _check_oip_classify(answer.json(), expected["cls"], [0, 3])
  answer = _post(f"{server.url}/v1/models/cls/versions/1:predict", {"instances": [{"text": TEXTS[2]}]})
  assert answer.status_code == 200, answer.text
  _check_tfs_rows(answer.json(), expected["cls"], [2])
  get = lambda path: httpx.get(server.url + path, timeout=REQUEST_TIMEOUT_S)  # noqa: E731
  assert get("/v2/models/cls/versions/1").json() == get("/v2/models/cls").json()
  assert get("/v2/models/cls/versions/1/ready").json() == {"name": "cls", "ready": True}
  for method, path in (("GET", "/v2/models/cls/versions/2"), ("GET", "/v2/models/cls/versions/2/ready"),
                       ("POST", "/v2/models/cls/versions/2/infer"), ("POST", "/v1/models/cls/versions/2:predict")):
    refused = httpx.request(method, server.url + path, json={"instances": ["a"]}, timeout=REQUEST_TIMEOUT_S)
    assert refused.status_code == 404 and "version '2'" in refused.json()["error"], (path, refused.text)
  refused = get("/v2/models/nope/versions/1")
  assert refused.status_code == 404 and "'nope' is not served" in refused.json()["error"], refused.text

  for model, body, words in (
      ("cls", {"instances": [{"text": "Where is Paris?", "sentence2": "Paris is in France."}]},
       "instances[0].sentence2: not an input of this model; its inputs are text, text_pair"),
      ("cls", {"instances": [{"text": "a"}, {"text": "b", "pair": "c"}]}, "instances[1].pair: not an input"),
      ("cls", {"inputs": {"text": ["a"], "sentence2": ["b"]}}, "inputs.sentence2: not an input"),
      ("enc", {"inputs": {"text": ["a"], "text_a": ["b"]}}, "inputs.text_a: not an input of this model; its inputs "
       "are text.")):
    refused = _post(f"{server.url}/v1/models/{model}:predict", body)
    assert refused.status_code == 400 and words in refused.json()["error"], (body, refused.text)


def test_compressed_bodies_are_decoded_within_the_body_limit(server, expected):
  """Content-Encoding gzip / deflate bodies answer as the plain body; a gzip body that decodes past the body limit is
  413 (its compressed size is small); another encoding is 415 naming it; the binary-data extension is a 400 saying
  it is not supported; a cut gzip stream is a 400 naming gzip."""
  import gzip
  import zlib
  body = json.dumps(_oip([TEXTS[1], TEXTS[4]])).encode()
  for encoding, data in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body))):
    answer = httpx.post(f"{server.url}/v2/models/cls/infer", content=data, timeout=REQUEST_TIMEOUT_S,
                        headers={"Content-Type": "application/json", "Content-Encoding": encoding})
    assert answer.status_code == 200, (encoding, answer.text)
    _check_oip_classify(answer.json(), expected["cls"], [1, 4])
  # The module's server takes 32 texts of 100000 characters: a body limit of ~77 MB; 100 MB of spaces gzip to 100 KB.
  compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
  bomb = b"".join([compressor.compress(b"[" + b" " * (1 << 20)) for _ in range(100)] + [compressor.flush()])
  refused = httpx.post(f"{server.url}/v2/models/cls/infer", content=bomb, timeout=REQUEST_TIMEOUT_S,
                       headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
  assert len(bomb) < 1 << 20 and refused.status_code == 413, refused.text
  assert "decoded from gzip" in refused.json()["error"], refused.text
  for headers, data, status, words in (
      ({"Content-Encoding": "br"}, body, 415, "Content-Encoding: 'br' is not supported"),
      ({"Content-Encoding": "gzip"}, gzip.compress(body)[:-8], 400, "gzip body is cut short"),
      ({"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(body))},
       body + b"\x05\x00\x00\x00hello", 400, "binary-data extension of KServe / Triton is not supported")):
    refused = httpx.post(f"{server.url}/v2/models/cls/infer", content=data, headers=headers, timeout=REQUEST_TIMEOUT_S)
    assert refused.status_code == status and words in refused.json()["error"], (headers, refused.text)
  assert httpx.get(f"{server.url}/v2/health/ready", timeout=REQUEST_TIMEOUT_S).status_code == 200


@pytest.mark.slow
def test_astral_texts_at_the_limits_and_model_ready_while_draining(folders, tmp_path):
  """A request within --max_inputs / --max_text_chars whose texts are characters outside the BMP (12 bytes each as
  json.dumps escapes them) is answered, not 413. After SIGTERM (a long --drain_seconds: the drain outlasts the
  checks), /v2/models/{name}/ready answers its own body, ready false with 503, while other requests get the drain's
  refusal."""
  server = Server(tmp_path, {"cls": folders["cls"]}, "--max_inputs=8", "--max_text_chars=2000",
                  "--drain_seconds=600").wait_ready()
  try:
    text = "\U0001F600" * 2000
    body = json.dumps(_oip([text] * 8, [text] * 8))  # ASCII escapes, as json.dumps and requests' json= send it
    answer = _post(f"{server.url}/v2/models/cls/infer", body)
    assert answer.status_code == 200, answer.text[:300]
    server.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while httpx.get(f"{server.url}/v2/health/ready", timeout=30).status_code != 503:
      assert time.monotonic() < deadline, f"not draining within {REQUEST_TIMEOUT_S} s after SIGTERM:\n{server.log()}"
      time.sleep(0.05)
    for path in ("/v2/models/cls/ready", "/v2/models/cls/versions/1/ready"):
      ready = httpx.get(server.url + path, timeout=30)
      assert ready.status_code == 503 and ready.json() == {"name": "cls", "ready": False}, (path, ready.text)
    refused = _post(f"{server.url}/v2/models/cls/infer", _oip(["a"]))
    assert refused.status_code == 503 and "shutting down" in refused.json()["error"], refused.text
    assert server.proc.poll() is None  # still draining: the answers above were the drain's
  finally:
    server.stop()
