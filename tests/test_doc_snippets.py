"""The Python blocks of README.md, docs/*.md and the research projects' READMEs run: each at tiny scale, or excused.

tests/test_readme_commands.py does this for the shell commands; here it is the ```python blocks a user copies into a
session. Every block is in SNIPPETS, found by its document and a line of it: run (its paths replaced by tiny model
directories and export folders, the names it assumes — `ids`, `keras_model` — given by a preamble), or excused with
what checks it instead. A block in neither, or an entry that matches no block, fails
`test_every_python_block_is_run_or_excused`. A run block is executed in this process (the one that sets
`KERAS_BACKEND` in a fresh interpreter); each bare expression followed by a comment that shows its answer
(`# [{'index': 0, 'score': 0.93}]`) is checked to answer with those keys, so a renamed field is a failing test, not
a stale page.
"""

import ast
import dataclasses
import pathlib
import re
import subprocess
import sys
from typing import Callable, Dict, Optional

import numpy as np
import pytest

from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import REPO_ROOT

DOCS = [REPO_ROOT / "README.md"] + sorted((REPO_ROOT / "docs").glob("*.md")) + sorted(
    (REPO_ROOT / "experiments" / "projects").glob("*/README.md"))
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@dataclasses.dataclass
class Run:
  """A block run: `paths` maps a literal of the block to a folder (`("tiny", head)`, `("exit", "classifier")` a tiny
  classifier with exit heads, or `(format, model)` of the export harness); `preamble` is code run first in the
  block's namespace; `replace` swaps other literals for tiny-scale ones."""
  paths: Dict[str, tuple] = dataclasses.field(default_factory=dict)
  preamble: str = ""
  replace: Dict[str, str] = dataclasses.field(default_factory=dict)  # other literals of the block, at tiny scale
  fresh_interpreter: bool = False
  check: Optional[Callable[[dict], None]] = None


_IDS = ("import numpy as np\n"
        "ids = np.array([[2, 10, 11, 12, 3, 0], [2, 13, 14, 3, 0, 0]], np.int32)\n"
        "mask = (ids > 0).astype(np.int32)\n"
        "type_ids = types = np.zeros_like(ids)\n"
        "positions = np.array([[1, 2], [1, 0]], np.int32)\n")


def _check_pretrainer_outputs(namespace):
  assert {"mlm_logits", "sop_logits"} <= set(namespace["outputs"]), sorted(namespace["outputs"])
  assert namespace["classifier"].num_labels == 3


SNIPPETS = {
    ("README.md", 'model = load_pretrained("path/to/hf_or_native_dir")'): Run(
        paths={"path/to/hf_or_native_dir": ("tiny", "pretrainer")}, preamble=_IDS, check=_check_pretrainer_outputs),
    ("docs/backends.md", 'os.environ["KERAS_BACKEND"] = "jax"'): Run(
        paths={"path/to/model_dir": ("tiny", "classifier")}, preamble=_IDS, fresh_interpreter=True),
    ("docs/early_exit.md", 'pipelines.classify("runs/topic"'): Run(paths={"runs/topic": ("exit", "classifier")}),
    ("docs/embeddings.md", 'pipelines.embed("paraphrase-albert-small-v2"'): Run(
        paths={"paraphrase-albert-small-v2": ("sentence_transformers", "encoder")}),
    ("docs/retrieval.md", 'pipelines.embed("runs/embedder"'): Run(paths={"runs/embedder": ("tiny", "encoder")}),
    ("docs/retrieval.md", 'pipelines.rerank("runs/reranker"'): Run(paths={"runs/reranker": ("tiny", "regression")}),
    ("docs/serving.md", "grpc.insecure_channel"): (
        "a client of a live gRPC server: tests/official_albert/serving/test_grpc_server.py runs this block against "
        "albert-serve"),
    ("docs/serving_openvino.md", "ov_model = ove.to_openvino_model(keras_model"): Run(
        paths={"export/mrpc_ov": ("openvino_f32", "classifier"), "export/pretrainer_ov": ("openvino_f32", "pretrainer"),
               "export/encoder_ov": ("openvino_f32", "encoder")},
        preamble=("keras_model = _models.model('encoder')\n"
                  "from official_albert.serving.openvino_runtime import OpenVINOExport as _E\n"
                  "calibration_inputs = [_E(_folders['export/encoder_ov']).encode(['a text', 'one more text'])]\n")),
    ("docs/serving_openvino.md", 'pipelines.question_answering("export/squad_ov"'): Run(
        paths={"export/squad_ov": ("openvino_f32", "span"), "export/race_ov": ("openvino_f32", "multiple_choice"),
               "export/ner_ov": ("openvino_f32", "token_classifier")},
        preamble="from official_albert import pipelines\n",  # (the page's previous block imports it)
        replace={'["red", "blue", "green", "black"]': '["red", "blue"]'}),  # (the tiny export takes 2 choices)
    ("docs/serving_openvino.md", 'requests.post("http://localhost:8000'): Run(
        paths={"export/mrpc_ov": ("openvino_f32", "classifier")}),  # (OVMS played by the IR itself: below)
}


def _blocks():
  """[(document, first line number, code)] of every ```python block."""
  found = []
  for path in DOCS:
    text = path.read_text(encoding="utf-8")
    for match in _BLOCK.finditer(text):
      found.append((str(path.relative_to(REPO_ROOT)), text[:match.start()].count("\n") + 2, match.group(1)))
  return found


def _entry(doc, code):
  hits = [key for key in SNIPPETS if key[0] == doc and key[1] in code]
  assert len(hits) <= 1, hits
  return hits[0] if hits else None


def test_every_python_block_is_run_or_excused():
  blocks = _blocks()
  missing = [f"{doc}:{line}" for doc, line, code in blocks if _entry(doc, code) is None]
  assert not missing, "python blocks neither run nor excused (add them to SNIPPETS): " + ", ".join(missing)
  used = {_entry(doc, code) for doc, _, code in blocks}
  stale = [key for key in SNIPPETS if key not in used]
  assert not stale, f"SNIPPETS entries that match no block any more: {stale}"


def _answers(code):
  """[(line of a bare expression, the keys its answer comment shows)] of a block."""
  lines = code.splitlines()
  shown = []
  for node in ast.parse(code).body:
    if isinstance(node, ast.Expr) and node.end_lineno < len(lines):
      comment = lines[node.end_lineno].strip()
      if re.match(r"# [\[{]", comment):
        shown.append((node.lineno, set(re.findall(r"'(\w+)':", comment.split("  ")[0]))))
  return shown


def _keys(value):
  if isinstance(value, list) and value and isinstance(value[0], list):
    value = value[0]
  if isinstance(value, list) and value:
    value = value[0]
  return set(value) if isinstance(value, dict) else None


def _run_here(code, namespace):
  """Runs the block's statements in `namespace`; returns {line of a bare expression: its value}."""
  values = {}
  for node in ast.parse(code).body:
    if isinstance(node, ast.Expr):
      values[node.lineno] = eval(compile(ast.Expression(node.value), "<doc block>", "eval"), namespace)  # noqa: S307
    else:
      exec(compile(ast.Module([node], type_ignores=[]), "<doc block>", "exec"), namespace)  # noqa: S102
  return values


@pytest.fixture(name="folders")
def fixture_folders(tiny_model_dirs, tiny_exports, tmp_path):
  def resolve(kind, name):
    if kind == "tiny":
      return tiny_model_dirs[name]
    if kind == "exit":
      from official_albert import AlbertConfig
      from official_albert.checkpoints.loading import build_model
      from official_albert.checkpoints.native import save_pretrained
      from tests import tiny
      model = build_model(name, AlbertConfig(**tiny.MODEL), tiny.NUM_LABELS, exit_heads=True)
      save_pretrained(model, str(tmp_path / "exit"), spm_model_file=str(tiny.SPM_MODEL_FILE))
      return str(tmp_path / "exit")
    pytest.importorskip("openvino") if kind.startswith("openvino") else None
    return tiny_exports.folder(kind, name)
  return resolve


RUN_BLOCKS = [(doc, line, code) for doc, line, code in _blocks() if isinstance(SNIPPETS.get(_entry(doc, code)), Run)]


@pytest.mark.slow
@pytest.mark.parametrize("doc,line,code", RUN_BLOCKS, ids=[f"{d}:{n}" for d, n, _ in RUN_BLOCKS])
def test_the_python_block_runs_and_answers_as_its_comments_show(doc, line, code, folders, tiny_exports,
                                                                  monkeypatch):
  run = SNIPPETS[_entry(doc, code)]
  paths = {literal: folders(*where) for literal, where in run.paths.items()}
  for literal, folder in paths.items():
    assert f'"{literal}"' in code, (doc, literal)
    code = code.replace(f'"{literal}"', repr(folder))
  for literal, tiny in run.replace.items():
    assert literal in code, (doc, literal)
    code = code.replace(literal, tiny)
  if run.fresh_interpreter:
    done = subprocess.run([sys.executable, "-c", run.preamble + code], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": CHILD_PYTHONPATH,
                                            "TF_CPP_MIN_LOG_LEVEL": "2", "HOME": str(pathlib.Path.home())})
    assert done.returncode == 0, f"{doc}:{line}\n{done.stderr[-3000:]}"
    return
  if "requests.post" in code:
    _serve_requests_with_the_ir(monkeypatch)
  namespace = {"__name__": "__doc_block__", "_models": tiny_exports.models, "_folders": paths}
  exec(compile(run.preamble, "<preamble>", "exec"), namespace)  # noqa: S102
  values = _run_here(code, namespace)
  for expression_line, keys in _answers(code):
    assert _keys(values[expression_line]) == keys, (f"{doc}:{line + expression_line - 1} answers "
                                                     f"{values[expression_line]!r}; its comment shows {keys}")
  if run.check:
    run.check(namespace)


def _serve_requests_with_the_ir(monkeypatch):
  """`requests.post` to a KServe v2 `/infer` answered as OVMS answers it: the body's INT32 inputs, by name and shape,
  run through the IR of the folder the block encoded with."""
  requests = pytest.importorskip("requests")
  from official_albert.serving.openvino_runtime import OpenVINOExport
  made = []
  original = OpenVINOExport.__init__

  def remember(self, *args, **kwargs):
    original(self, *args, **kwargs)
    made.append(self)

  monkeypatch.setattr(OpenVINOExport, "__init__", remember)

  class Reply:
    def __init__(self, body):
      self._body = body

    def json(self):
      return self._body

  def post(url, json):
    assert re.fullmatch(r"http://localhost:8000/v2/models/\w+/infer", url), url
    export = made[-1]
    inputs = {}
    for tensor in json["inputs"]:
      assert tensor["datatype"] == "INT32", tensor
      inputs[tensor["name"]] = np.asarray(tensor["data"], np.int32).reshape(tensor["shape"])
    outputs = export(inputs)
    return Reply({"outputs": [{"name": name, "datatype": "FP32", "shape": list(np.shape(value)),
                               "data": np.asarray(value).ravel().tolist()} for name, value in outputs.items()]})

  monkeypatch.setattr(requests, "post", post)
