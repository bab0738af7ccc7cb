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

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
TINY = dict(tiny.MODEL)
LABELS = ["irrelevant", "relevant"]
TEXTS = ["a gripping film", "boring", "the invoice is wrong and I want my money back now", "great work",
         "it crashes on start, every single time I open it on my phone", "ok", "Paris is in France.",
         "what a lovely day for a walk along the river with friends", "no", "the cat sat on the mat"]
PAIRS = ["a movie", "dull", "billing", "praise", "bug report", "fine", "geography", "weather", "yes", "animals"]
START_TIMEOUT_S = 300  # a loaded 2-core machine may take minutes to import TensorFlow and load the models
REQUEST_TIMEOUT_S = 120


# ----------------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def folders(tmp_path_factory, spm_model_file, tiny_model_dirs):
  """A 2-label classifier directory (labels.json), its SavedModel export, and an encoder directory (hidden 32: the
  session's, tests/tiny.py)."""
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
  out = {"cls": str(root / "cls"), "sm": str(root / "cls_sm"), "enc": str(root / "enc")}
  try:
    import openvino  # noqa: F401

    from official_albert.serving import openvino_export
  except ImportError:  # the OpenVINO extra is optional: its folders are then left out
    return out
  for name, head in (("cls", "classifier"), ("enc", "encoder")):
    out[f"{name}_ov"] = openvino_export.export_openvino(out[name], str(root / f"{name}_ov"), head, "f32", seq_length=64)
  return out


@pytest.fixture(scope="module")
def expected(folders):
  """The in-process pipelines' answers on the same folders."""
  return {"cls": pipelines.classify(folders["cls"], TEXTS), "cls_pairs": pipelines.classify(folders["cls"], TEXTS,
                                                                                            text_pairs=PAIRS),
          "sm": pipelines.classify(folders["sm"], TEXTS), "sm_pairs": pipelines.classify(folders["sm"], TEXTS,
                                                                                         text_pairs=PAIRS),
          "enc": embedding.embed(folders["enc"], TEXTS),
          **({"cls_ov": pipelines.classify(folders["cls_ov"], TEXTS),
              "enc_ov": embedding.embed(folders["enc_ov"], TEXTS)} if "cls_ov" in folders else {})}


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class Server:
  """`python -m official_albert.serve` in a child process; `url`, `proc`, `log()`."""

  def __init__(self, tmp_path, models, *flags):
    self.port = _free_port()
    self.url = f"http://127.0.0.1:{self.port}"
    self.log_path = tmp_path / f"server_{self.port}.log"
    args = [sys.executable, "-m", "official_albert.serve", f"--port={self.port}"]
    for name, folder in models.items():
      args += [f"--model_dir={folder}", f"--model_name={name}"]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
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
  s = Server(tmp_path_factory.mktemp("server"), folders, "--max_batch_size=8", "--batch_timeout_ms=20")
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
    for model in [m for m in ("enc", "enc_ov") if m in expected]:
      jobs.append((f"{model} embeddings {idx}", "/v1/embeddings", {"model": model, "input": texts},
                   lambda r, m=model, i=idx: np.testing.assert_allclose(
                       [d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"])],
                       expected[m][i], atol=1e-5)))
    if "cls_ov" in expected:
      jobs.append((f"cls_ov {idx}", "/v2/models/cls_ov/infer", _oip(texts),
                   lambda r, i=idx: _check_oip_classify(r.json(), expected["cls_ov"], i)))
    jobs.append((f"tfs rows {idx}", "/v1/models/cls:predict", {"instances": [{"text": t} for t in texts]},
                 lambda r, i=idx: _check_tfs_rows(r.json(), expected["cls"], i)))
    jobs.append((f"tfs columns {idx}", "/v1/models/enc:predict", {"inputs": {"text": texts}},
                 lambda r, i=idx: np.testing.assert_allclose(r.json()["outputs"], expected["enc"][i], atol=1e-5)))
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
  assert [i["name"] for i in meta["inputs"]] == ["text", "text_pair"]
  assert {o["name"]: o["shape"] for o in meta["outputs"]}["probabilities"] == [-1, 2]
  assert httpx.get(f"{server.url}/v2/models/enc/ready", timeout=30).json() == {"name": "enc", "ready": True}
  answer = _post(f"{server.url}/v1/embeddings", {"model": "enc", "input": TEXTS[0], "encoding_format": "base64"})
  assert answer.status_code == 200, answer.text
  body = answer.json()
  vector = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), "<f4")
  np.testing.assert_allclose(vector, expected["enc"][0], atol=1e-5)
  assert body["object"] == "list" and body["model"] == "enc" and body["usage"]["prompt_tokens"] > 2


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
    ("/v1/models/cls:predict", {"instances": []}, 400, "instances"),
    ("/v2/models/enc/infer", _oip(["a"], ["b"]), 400, "text_pair"),
]


def test_malformed_requests_among_good_ones(server, expected):
  """50 bad requests interleaved with good ones: each bad one 4xx with an error, each good one right, still ready."""
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


def _wait_exit(proc, timeout_s=180):
  try:
    return proc.wait(timeout=timeout_s)
  except subprocess.TimeoutExpired:
    proc.kill()
    raise AssertionError(f"the server did not exit within {timeout_s} s")


@pytest.mark.timing
def test_sigterm_under_load_loses_no_request(folders, expected, tmp_path):
  """200 requests at concurrency 8, SIGTERM after the 100th answer: each answered right or refused (503 or no
  connection), none lost or hung; exit code 0."""
  server = Server(tmp_path, {"cls": folders["cls"]}, "--drain_seconds=2", "--max_batch_size=8").wait_ready()
  answered, lock, sent_term = [0], threading.Lock(), threading.Event()
  try:
    def call(n):
      i = n % len(TEXTS)
      try:
        response = httpx.post(f"{server.url}/v2/models/cls/infer", json=_oip([TEXTS[i]]), timeout=REQUEST_TIMEOUT_S)
      except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError) as e:  # closed: refused, not lost
        assert sent_term.is_set(), f"request {n}: {e!r} before SIGTERM"
        return "refused"
      if response.status_code == 503:
        assert sent_term.is_set() and "error" in response.json(), response.text
        return "503"
      assert response.status_code == 200, response.text
      _check_oip_classify(response.json(), expected["cls"], [i])
      with lock:
        answered[0] += 1
        if answered[0] == 100:
          server.proc.send_signal(signal.SIGTERM)
          sent_term.set()
      return "ok"

    outcomes = _run_concurrently(call, range(200), 8)
    assert sent_term.is_set() and outcomes.count("ok") >= 100 and len(outcomes) == 200
    assert _wait_exit(server.proc) == 0, server.log()
  finally:
    server.stop()


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
  rename = lambda s: s.replace("mrpc", "cls").replace("embedder", "enc")
  for method, path, data in requests:
    response = httpx.request(method, server.url + rename(path), content=None if data is None else rename(data),
                             timeout=REQUEST_TIMEOUT_S)
    assert response.status_code == 200, (path, data, response.text)


def test_openai_dimensions_serve_a_trained_matryoshka_width_and_refuse_others(server, folders):
  """`dimensions` (OpenAI's) answers as `embed(folder, texts, dim=K)`: the first K dimensions re-normalised, for a
  width the directory was trained at; another width is refused naming the trained ones."""
  answer = _post(f"{server.url}/v1/embeddings", {"model": "enc", "input": TEXTS, "dimensions": 16})
  assert answer.status_code == 200, answer.text
  vectors = np.asarray([d["embedding"] for d in answer.json()["data"]])
  np.testing.assert_allclose(vectors, embedding.embed(folders["enc"], TEXTS, dim=16), atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=1e-5)
  refused = _post(f"{server.url}/v1/embeddings", {"model": "enc", "input": TEXTS[:2], "dimensions": 8})
  assert refused.status_code == 400, refused.text
  assert refused.json()["error"].startswith("dimensions:") and "[32, 16]" in refused.json()["error"]
  bad = _post(f"{server.url}/v1/embeddings", {"model": "enc", "input": "a", "dimensions": "16"})
  assert bad.status_code == 400 and bad.json()["error"].startswith("dimensions:")
  assert httpx.get(f"{server.url}/v2/health/ready", timeout=REQUEST_TIMEOUT_S).status_code == 200
