"""The export folders of the task heads served (official_albert.serve): answers equal the pipelines on the same folder.

The export harness's folders (`tiny_exports`, tests/official_albert/serving/export_harness.py): OpenVINO exports of
the question answering (span, squad_v2), tagging, multiple-choice and pretrainer heads, a LiteRT multiple-choice
export, and SavedModels (with text signatures) of span, squad_v2, tagging and multiple choice answer over OIP as
`question_answering`, `token_classification`, `multiple_choice` and `fill_mask` called on the folder (strings
identical, numbers within 1e-5); a pretrainer SavedModel answers fill-mask with
`parameters.top_k` as `fill_mask_saved_model(folder, text, top_k=k)`, and a top_k above its export's --top_k is
refused 400 naming it; a LiteRT classifier answers token ids (INT32) as it answers the same text. SavedModels exported
without spiece.model (token ids only) are refused at start-up naming the folder, why, and the fix (encoder
SavedModels with text are served in test_server.py).
"""

import json
import re

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from official_albert.serving import embedding  # noqa: E402
from official_albert.serving import pipelines  # noqa: E402
from official_albert.serving import served_model  # noqa: E402
from official_albert.serving import task_pipelines  # noqa: E402
from tests import tiny  # noqa: E402
from tests.official_albert.serving import export_harness  # noqa: E402
from tests.official_albert.serving.test_server import _oip  # noqa: E402
from tests.official_albert.serving.test_server import _oip_ids  # noqa: E402
from tests.official_albert.serving.test_server import _outputs  # noqa: E402
from tests.official_albert.serving.test_server import _post  # noqa: E402
from tests.official_albert.serving.test_server import _run_concurrently  # noqa: E402
from tests.official_albert.serving.test_server import Server  # noqa: E402

QUESTIONS = ["What nested on the roof?", "How many modules were there in 1990?", "who sat?"]
CONTEXTS = ["A blue heron nested on the roof of the west wing, and the gardeners planted tulips beside the gate every "
            "spring while the library grew.", "Naïve readers found twelve modules in 1990; by 2001 there were 340.",
            "the cat sat on the mat"]
TEXTS = ["Ann lives in Paris", "it crashes on start, every single time I open it", "ok", "great work"]
MC = [("Tom has a red ball.", "Tom has a _ ball.", ["red", "blue"]),
      ("The cat sat on the mat.", "Where did the cat sit?", ["on the mat", "in a tree"]),
      ("Paris is in France.", "Where is Paris?", ["France", "Peru"])]
MASKED = ["the cat sat on the [MASK].", "[MASK] is in [MASK].", "a [MASK] film"]


# ------------------------------------------------------------------------------- SavedModels refused (in process)
@pytest.mark.parametrize("name, words", [
    ("span", "a span SavedModel without text signatures (exported from a directory without spiece.model) is not "
             "served (the server answers it from text, as pipelines.question_answering does, with the tokenizer of "
             "its text signatures); re-export it with --spm_model_file, or serve the model directory."),
    ("squad_v2", "re-export it with --spm_model_file, or serve the model directory"),
    ("token_classifier", "pipelines.token_classification"),
    ("multiple_choice", "a multiple_choice SavedModel without text signatures"),
    ("encoder", "an encoder SavedModel without text signatures (exported from a directory without spiece.model) is "
                "not served (its signatures take token ids, and the server serves a SavedModel's `embed` signature); "
                "re-export it with --spm_model_file, or serve its OpenVINO / LiteRT export, which takes token ids."),
    ("regression", "a classifier SavedModel without text signatures")])
def test_saved_models_of_other_heads_are_refused_naming_why_and_what_serves_them(tiny_exports, name, words):
  """(The harness's SavedModels of these heads are exported without spiece.model: token ids only.)"""
  folder = tiny_exports.folder("saved_model", name)
  with pytest.raises(served_model.ModelLoadError, match=re.escape(folder) + ": " + ".*" + re.escape(words)):
    served_model.ServedModel(name, folder)
  if name == "encoder":  # the pipeline the server would call refuses it the same way
    with pytest.raises(ValueError, match=re.escape(folder) + " is an encoder SavedModel without text signatures.*"
                       "re-export it with --spm_model_file"):
      embedding.embed(folder, TEXTS)


# ------------------------------------------------------------------------------------------- the server (large)
SERVED = {"qa": ("openvino", "span"), "qa2": ("openvino", "squad_v2"), "tag": ("openvino", "token_classifier"),
          "mc": ("openvino", "multiple_choice"), "mc_lite": ("litert", "multiple_choice"),
          "mlm": ("saved_model", "pretrainer"), "mlm_ov": ("openvino", "pretrainer"),
          "cls_lite": ("litert", "classifier")}


# SavedModels of the task heads with their text signatures (exported here from the harness's model directories, which
# hold spiece.model; the harness's own SavedModels of these heads take ids only): name → head.
TASK_SAVED_MODELS = {"qa_sm": "span", "qa2_sm": "squad_v2", "tag_sm": "token_classifier", "mc_sm": "multiple_choice"}


@pytest.fixture(scope="module")
def folders(tiny_exports, tmp_path_factory):
  pytest.importorskip("openvino")
  pytest.importorskip("ai_edge_litert")
  from official_albert.serving import export
  out = {name: tiny_exports.folder(fmt, model) for name, (fmt, model) in SERVED.items()}
  root = tmp_path_factory.mktemp("task_saved_models")
  for name, head in TASK_SAVED_MODELS.items():
    out[name] = export.export_from_model_dir(tiny_exports.models.dir(head), str(root / name), head=head,
                                             **export_harness.export_options("saved_model", head))
  return out


@pytest.fixture(scope="module")
def server(folders, tmp_path_factory):
  s = Server(tmp_path_factory.mktemp("export_server"), folders, "--max_batch_size=8", "--batch_timeout_ms=20")
  try:
    yield s.wait_ready()
  finally:
    s.stop()


def _infer(server, name, inputs, **fields):
  body = {"inputs": [{"name": n, "datatype": "BYTES", "shape": [len(v)] if not isinstance(v[0], list) else
                      [len(v), len(v[0])], "data": v} for n, v in inputs], **fields}
  response = _post(f"{server.url}/v2/models/{name}/infer", body)
  assert response.status_code == 200, (name, response.text)
  return _outputs(response.json())


def _same_words(got, want):
  assert [[(w["word"], w["start"], w["end"], w["label"]) for w in r] for r in got] == [
      [(w["word"], w["start"], w["end"], w["label"]) for w in r] for r in want]
  np.testing.assert_allclose([w["score"] for r in got for w in r], [w["score"] for r in want for w in r], atol=1e-5)


def _same_answers(got, want):
  assert [(a["answer"], a["start"], a["end"]) for a in got] == [(a["answer"], a["start"], a["end"]) for a in want]
  np.testing.assert_allclose([a["score"] for a in got], [a["score"] for a in want], atol=1e-5)


@pytest.mark.large
def test_task_head_exports_answer_as_their_pipelines_on_the_folder(server, folders, tiny_exports):
  """QA (span, squad_v2; OpenVINO and SavedModel each), tagging and multiple choice (OpenVINO, LiteRT, SavedModel) at
  concurrency 4, one or two rows a request: each answer equals the task pipeline called in process on the same folder
  with its defaults. The SavedModels' pipelines (their `from_ids` signature, `SavedModelRuntime`) also equal the
  pipelines on the model directories they were exported from, at the export's length."""
  want = {name: task_pipelines.question_answering(folders[name], QUESTIONS, CONTEXTS) for name in ("qa", "qa2",
                                                                                                   "qa_sm", "qa2_sm")}
  want.update({name: task_pipelines.token_classification(folders[name], TEXTS) for name in ("tag", "tag_sm")})
  for name in ("mc", "mc_lite", "mc_sm"):
    want[name] = task_pipelines.multiple_choice(folders[name], [c for c, _, _ in MC], [q for _, q, _ in MC],
                                                [o for _, _, o in MC])
  length = export_harness.SEQ  # (the SavedModels' --seq_length: the length their pipelines pack at)
  for name, head in (("qa_sm", "span"), ("qa2_sm", "squad_v2")):
    _same_answers(want[name], task_pipelines.question_answering(
        tiny_exports.models.dir(head), QUESTIONS, CONTEXTS, max_seq_length=length))
  _same_words(want["tag_sm"], task_pipelines.token_classification(tiny_exports.models.dir("token_classifier"), TEXTS,
                                                                  seq_length=length))
  directory_mc = task_pipelines.multiple_choice(tiny_exports.models.dir("multiple_choice"), [c for c, _, _ in MC],
                                                [q for _, q, _ in MC], [o for _, _, o in MC], max_seq_length=length)
  assert [r["label"] for r in want["mc_sm"]] == [r["label"] for r in directory_mc]
  np.testing.assert_allclose([r["scores"] for r in want["mc_sm"]], [r["scores"] for r in directory_mc], atol=1e-5)
  jobs = [(name, [i, (i + 1) % 3] if i % 2 else [i]) for name in ("qa", "qa2", "qa_sm", "qa2_sm", "mc", "mc_lite",
                                                                            "mc_sm")
          for i in range(3)]
  jobs += [(name, [i, (i + 1) % len(TEXTS)] if i % 2 else [i]) for name in ("tag", "tag_sm") for i in range(len(TEXTS))]

  def call(job):
    name, idx = job
    if name.startswith("qa"):
      out = _infer(server, name, [("question", [QUESTIONS[i] for i in idx]), ("context", [CONTEXTS[i] for i in idx])])
      reference = [want[name][i] for i in idx]
      assert out["answer"]["data"] == [a["answer"] for a in reference]
      assert out["start"]["data"] == [a["start"] for a in reference] and out["end"]["data"] == [
          a["end"] for a in reference]
      np.testing.assert_allclose(out["score"]["data"], [a["score"] for a in reference], atol=1e-5)
    elif name.startswith("tag"):
      out = _infer(server, name, [("text", [TEXTS[i] for i in idx])])
      _same_words([json.loads(w) for w in out["words"]["data"]], [want[name][i] for i in idx])
    else:
      out = _infer(server, name, [("context", [MC[i][0] for i in idx]), ("question", [MC[i][1] for i in idx]),
                                  ("choices", [MC[i][2] for i in idx])])
      reference = [want[name][i] for i in idx]
      assert out["label"]["data"] == [r["label"] for r in reference] and out["choice"]["data"] == [
          r["choice"] for r in reference]
      assert out["scores"]["shape"] == [len(idx), tiny.NUM_CHOICES]
      np.testing.assert_allclose(out["scores"]["data"], [p for r in reference for p in r["scores"]], atol=1e-5)
    return name

  assert len(_run_concurrently(call, jobs * 2, 4)) == 2 * len(jobs)
  three = _post(f"{server.url}/v2/models/mc/infer", {"inputs": [
      {"name": "context", "datatype": "BYTES", "shape": [1], "data": ["a"]},
      {"name": "question", "datatype": "BYTES", "shape": [1], "data": ["b"]},
      {"name": "choices", "datatype": "BYTES", "shape": [1, 3], "data": [["c", "d", "e"]]}]})
  assert three.status_code == 400 and "exported for 2 choices" in three.json()["error"], three.text
  ids = _post(f"{server.url}/v2/models/qa/infer", _oip_ids([([2, 5, 3], [1, 1, 1], [0, 0, 0])]))
  assert ids.status_code == 400 and "takes text, not token ids" in ids.json()["error"], ids.text
  meta = httpx.get(f"{server.url}/v2/models/qa2", timeout=30).json()
  assert meta["platform"] == "official_albert_openvino" and [i["name"] for i in meta["inputs"]] == ["question",
                                                                                                    "context"]
  meta = httpx.get(f"{server.url}/v2/models/mc_sm", timeout=30).json()
  assert meta["platform"] == "official_albert_saved_model" and [i["name"] for i in meta["inputs"]] == [
      "context", "question", "choices"]
  assert httpx.get(f"{server.url}/v2/health/ready", timeout=30).status_code == 200


def _flat(result):
  return result if isinstance(result[0], dict) else [p for mask in result for p in mask]


def _same_predictions(got, want):
  assert [(p["token"], p["token_str"], p["sequence"]) for p in _flat(got)] == [
      (p["token"], p["token_str"], p["sequence"]) for p in _flat(want)]
  np.testing.assert_allclose([p["score"] for p in _flat(got)], [p["score"] for p in _flat(want)], atol=1e-5)


@pytest.mark.large
def test_fill_mask_exports_answer_as_their_pipelines_with_top_k(server, folders):
  """A pretrainer SavedModel (default top_k and `parameters.top_k` up to its export's --top_k=5; above it, 400 naming
  it) and a pretrainer OpenVINO export: each text's predictions equal the folder's pipeline on it alone."""
  for k in (None, 3, 5):
    options = {} if k is None else {"top_k": k}
    for text in MASKED:
      out = _infer(server, "mlm", [("text", [text])], **({"parameters": options} if options else {}))
      _same_predictions(json.loads(out["predictions"]["data"][0]),
                        pipelines.fill_mask_saved_model(folders["mlm"], text, **options))
  several = _infer(server, "mlm", [("text", MASKED)], parameters={"top_k": 2})
  for got, text in zip(several["predictions"]["data"], MASKED):
    _same_predictions(json.loads(got), pipelines.fill_mask_saved_model(folders["mlm"], text, top_k=2))
  too_many = _post(f"{server.url}/v2/models/mlm/infer", {"parameters": {"top_k": 6}, **_oip(MASKED[:1])})
  assert too_many.status_code == 400, too_many.text
  assert too_many.json()["error"].startswith("parameters.top_k: 6, but model 'mlm' is a SavedModel exported with "
                                             "--top_k=5"), too_many.text
  cut = _post(f"{server.url}/v2/models/mlm/infer", _oip([" ".join(["word"] * 60) + " [MASK]"]))
  assert cut.status_code == 400 and "beyond the export's seq_length=48" in cut.json()["error"], cut.text
  for k in (None, 7):  # (one text a request, one at a time: the folder's bf16 IR, called as the pipeline calls it)
    for text in MASKED:
      out = _infer(server, "mlm_ov", [("text", [text])], **({"parameters": {"top_k": k}} if k else {}))
      _same_predictions(json.loads(out["predictions"]["data"][0]),
                        pipelines.fill_mask(folders["mlm_ov"], [text], **({"top_k": k} if k else {}))[0])


@pytest.mark.large
def test_a_litert_classifier_answers_token_ids_as_its_text(server, folders):
  """A LiteRT classifier: OIP `input_word_ids` (INT32, rows of different lengths in concurrent requests) give the
  answer the same texts get over OIP, and `classify` on the folder (labels identical, probabilities within 1e-5)."""
  runtime = pipelines.open_export_folder(folders["cls_lite"])
  want = pipelines.classify(folders["cls_lite"], TEXTS)
  text_out = _infer(server, "cls_lite", [("text", TEXTS)])
  assert text_out["label"]["data"] == [w["label"] for w in want]
  labels = list(tiny.LABELS)
  expected = np.asarray([[w["probabilities"][n] for n in labels] for w in want])
  np.testing.assert_allclose(np.reshape(text_out["probabilities"]["data"], (len(TEXTS), -1)), expected, atol=1e-5)

  def call(i):
    packed = runtime.encode([TEXTS[i]])  # the text's own length: rows of several lengths share the server's calls
    row = tuple(packed[k][0].tolist() for k in ("input_word_ids", "input_mask", "input_type_ids"))
    response = _post(f"{server.url}/v2/models/cls_lite/infer", _oip_ids([row]))
    assert response.status_code == 200, response.text
    out = _outputs(response.json())
    assert out["label"]["data"] == [want[i]["label"]] and out["label_id"]["data"] == [want[i]["label_id"]]
    np.testing.assert_allclose(out["probabilities"]["data"], expected[i], atol=1e-5)
    return i

  assert sorted(_run_concurrently(call, list(range(len(TEXTS))) * 3, 4)) == sorted(list(range(len(TEXTS))) * 3)
  meta = httpx.get(f"{server.url}/v2/models/cls_lite", timeout=30).json()
  assert [i["name"] for i in meta["inputs"]] == ["text", "text_pair", "input_word_ids", "input_mask", "input_type_ids"]
