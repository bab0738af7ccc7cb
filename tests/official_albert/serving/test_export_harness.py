"""The export harness (issue 45 item 7): every export format × every model × every attention type, each cell as
export_harness.RULES declares it (equal to Keras within its tolerance, refused with its message, written with a
warning that the runtime computes other numbers, or no such export).

Tiers (`_fast`): the refusals, the dense folders the OpenVINO, LiteRT and SavedModel tests read too (written once
per run), the checkpoint conversions of dense models and the classifier under every attention type run in the fast
tier; the other exports (chunked and block-sparse heads, exit heads, int8: each a fresh export of 5-20 s) are
`large`, and of those the cells that add nothing to another cell's check run only with ALBERT_EXPORT_HARNESS=all
(`_sampled_out`).
"""

import os
import re

import numpy as np
import pytest

from official_albert.config import ATTENTION_FIELDS
from official_albert.config import ATTENTION_TYPES
from tests.official_albert.serving import export_harness as harness
from tests.official_albert.serving.export_harness import Equal
from tests.official_albert.serving.export_harness import NoExport
from tests.official_albert.serving.export_harness import Refuses
from tests.official_albert.serving.export_harness import Warns


def _exporter(fmt):
  """The module whose `supports(attention_type)` says which attention types the format's runtime computes."""
  from official_albert.checkpoints import hf
  from official_albert.checkpoints import keras_hub_preset
  from official_albert.serving import export
  from official_albert.serving import litert_export
  from official_albert.serving import openvino_export
  return {"saved_model": export, "openvino_f32": openvino_export, "openvino_bf16": openvino_export,
          "openvino_int8": openvino_export, "litert": litert_export, "hf": hf, "sentence_transformers": hf,
          "keras_hub": keras_hub_preset}.get(fmt)


# The cells whose folders other tests read too (test_export.py, test_openvino_export.py, test_litert_export.py):
# written once per run whichever file asks first.
SHARED = {("saved_model", "pretrainer"), ("saved_model", "classifier")} | {
    (f, m) for f in ("openvino_f32", "openvino_bf16") for m in harness.tiny.HEADS} | {
    ("litert", m) for m in harness.LITERT_MODELS}


def _fast(cell) -> bool:
  """Refusals, the shared dense folders, the conversions (a second or two each) of dense models, and the classifier
  under every attention type in the SavedModel, OpenVINO and checkpoint formats."""
  fmt, name, attention = cell
  if isinstance(harness.expected(cell), (Refuses, NoExport)):
    return True
  if fmt == "openvino_int8":  # (the int8 gate's own tests export the encoder and the pretrainer at int8)
    return False
  if name == "classifier" and (fmt != "saved_model" or attention != "chunked"):
    return True
  if attention != "dense":
    return False
  return (fmt, name) in SHARED or fmt in ("hf", "keras_hub", "sentence_transformers")


# Every cell is decided (the table), but of the `large` exports only those that test something no other cell does
# run in `make test`: the encoder and the classifier under every attention type in every format, exit heads and the
# other heads dense. A task head's chunked or block-sparse export is the encoder's attention with the head's dense
# layers on top (its head is checked dense in every format), and int8 quantizes the shared block whatever head sits
# on it (the encoder's, the classifier's and the exit heads' int8 cells run). The 69 others ran once when the harness
# was written (2026-11-28; docs/design.md, "The export harness"); `ALBERT_EXPORT_HARNESS=all` runs them again.
EVERY_CELL = os.environ.get("ALBERT_EXPORT_HARNESS") == "all"


def _sampled_out(cell) -> bool:
  fmt, name, attention = cell
  if EVERY_CELL or _fast(cell) or name in ("classifier", "encoder"):
    return False
  if name == "exit_classifier":
    return attention != "dense"
  return attention != "dense" or fmt == "openvino_int8"


def _marks(cell):
  if _fast(cell):
    return ()
  if _sampled_out(cell):
    return (pytest.mark.large, pytest.mark.skip(reason="a task head's non-dense or int8 export: the encoder's and "
                                                   "classifier's cells cover it; ALBERT_EXPORT_HARNESS=all runs it"))
  return (pytest.mark.large,)


CELLS = [pytest.param(c, id="-".join(c), marks=_marks(c)) for c in harness.cells()]


def test_every_cell_is_decided_once():
  """Each (format, model, attention type) matches exactly one rule, and every rule matches a cell."""
  assert set(harness.ATTENTION) == set(ATTENTION_TYPES)
  assert set(harness.MODELS) >= {name for name, _ in harness.tiny.HEADS.items()}
  assert [c for c in harness.cells() if len(harness.matching_rules(c)) != 1] == []
  used = {id(r) for c in harness.cells() for r in harness.matching_rules(c)}
  assert [r for r in harness.RULES if id(r) not in used] == []
  assert {r.format for r in harness.RULES} == set(harness.FORMATS)


def test_attention_types_are_listed_once():
  """The attention types and their fields are config.py's; the layer and the binaries read them from there."""
  from official_albert import convert_checkpoint
  from official_albert.modeling.layers import attention
  from official_albert.training import model_source
  assert attention.ATTENTION_TYPES is ATTENTION_TYPES
  assert model_source.COMPUTE_FIELDS is ATTENTION_FIELDS
  from absl import flags
  fv = flags.FlagValues()
  convert_checkpoint.define_flags(fv)
  assert tuple(fv["attention_type"].parser.enum_values) == ATTENTION_TYPES


@pytest.mark.parametrize("fmt", [f for f in harness.FORMATS if _exporter(f) is not None])
def test_supports_agrees_with_the_table(fmt):
  """An exporter's `supports(attention_type)` is False exactly where the table refuses or warns for that attention
  type on a model the format otherwise exports."""
  module = _exporter(fmt)
  for attention in ATTENTION_TYPES:
    outcomes = [harness.expected((fmt, name, attention)) for name in harness.MODELS
                if isinstance(harness.expected((fmt, name, "dense")), Equal)]
    assert outcomes, fmt
    if module.supports(attention, **({"precision": "int8"} if fmt == "openvino_int8" else {})):
      assert all(isinstance(o, Equal) for o in outcomes), (fmt, attention, outcomes)
    else:
      assert all(isinstance(o, (Refuses, Warns)) for o in outcomes), (fmt, attention, outcomes)
  with pytest.raises(ValueError, match="attention_type='sparse' is not one of"):
    module.supports("sparse")


def _cosine(a, b):
  a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
  norms = np.linalg.norm(a) * np.linalg.norm(b)
  return 1.0 if norms == 0 else float(a @ b / norms)


def _compare(got, want, outcome: Equal, cell):
  keys = sorted(set(outcome.outputs or got) & set(want))
  missing = sorted(set(outcome.outputs or ()) - set(got))
  assert keys and not missing, (cell, sorted(got), sorted(want))
  for key in keys:
    a, b = np.asarray(got[key]), np.asarray(want[key])
    assert a.shape == b.shape, (cell, key, a.shape, b.shape)
    if not np.issubdtype(b.dtype, np.floating) or "index" in key:
      if outcome.cosine is None:  # (reduced precisions may swap near-tied top-k entries)
        np.testing.assert_array_equal(a, b, err_msg=f"{cell} {key}")
    elif outcome.atol is not None:
      np.testing.assert_allclose(a, b, atol=outcome.atol, rtol=0, err_msg=f"{cell} {key}")
    else:
      assert _cosine(a, b) >= outcome.cosine, (cell, key, _cosine(a, b))


# The Keras outputs each cell compares with, computed once per session: a model's SavedModel, OpenVINO (f32, bf16,
# int8), LiteRT, HF and KerasHub cells compare with the same eager call of the same read-only model (~1 s of CPU each
# on 2 cores, seven times over), and the OpenVINO and LiteRT cells of a dense model with the same short-input call.
_REFERENCES = {}


def _reference(models, name, attention, embedding=None, full_depth=False):
  """`models.reference(...)`, computed on first use (its arrays made read-only: cells share them)."""
  key = (models, name, attention, embedding is not None, full_depth)
  if key not in _REFERENCES:
    outputs = models.reference(name, attention, embedding, full_depth=full_depth)
    for value in outputs.values():
      value.setflags(write=False)
    _REFERENCES[key] = outputs
  return _REFERENCES[key]


def _short_reference(models, name, attention, short):
  """The Keras model's outputs on `short` (the dynamic-shape check's inputs), computed once per model."""
  key = (models, name, attention, "short")
  if key not in _REFERENCES:
    from official_albert.modeling.embedder import AlbertEmbedder
    head = harness.MODELS[name][0]
    reference = models.model(name, attention)
    if head == "encoder":
      reference = AlbertEmbedder(encoder=reference)
    call = dict(patience=harness.PATIENCE) if harness.MODELS[name][2] else {}
    _REFERENCES[key] = {k: np.asarray(v) for k, v in reference(short, training=False, **call).items()
                        if not isinstance(v, (list, tuple))}
  return _REFERENCES[key]


def _runner(fmt, folder, name):
  """The folder's runtime, loaded once for the cell's two input shapes: an OpenVINO IR compiled once and LiteRT's
  interpreter (the dynamic-shape check runs the same compiled model on another batch size and sequence length);
  the other formats through `harness.run`."""
  if fmt == "openvino_f32":
    from official_albert.serving import openvino_ir
    compiled = openvino_ir.compile_openvino(folder, precision="f32")
    return lambda inputs: openvino_ir.run_compiled(compiled, inputs)
  if fmt == "litert":
    from official_albert.serving.litert_runtime import LiteRTExport
    return LiteRTExport(folder)
  return lambda inputs: harness.run(fmt, folder, name, inputs)


@pytest.mark.parametrize("cell", CELLS)
def test_cell(tiny_exports, cell):
  fmt, name, attention = cell
  outcome = harness.expected(cell)
  if isinstance(outcome, NoExport):
    with pytest.raises(harness.ExportError, match=re.escape(outcome.why)):
      tiny_exports.folder(*cell)
    return
  if isinstance(outcome, Refuses):
    with pytest.raises(Exception, match=re.escape(outcome.match)):
      tiny_exports.folder(*cell)
    return
  head = harness.MODELS[name][0]
  inputs = harness.inputs_for(head)
  folder = tiny_exports.folder(*cell)
  run = _runner(fmt, folder, name)
  got = run(inputs)
  models = tiny_exports.models
  embedding = harness.EMBEDDING if fmt == "sentence_transformers" else None
  if isinstance(outcome, Warns):
    assert outcome.match in tiny_exports.warnings(*cell)
    # The warning is true: the runtime's numbers are not this model's (they are dense attention's).
    want = _reference(models, name, attention, embedding, full_depth=True)
    keys = sorted(set(got) & set(want))
    assert max(np.max(np.abs(got[k] - want[k])) for k in keys) > 1e-3, (cell, keys)
    dense = _reference(models, name, "dense", embedding, full_depth=True)
    _compare(got, dense, Equal(atol=1e-4), cell)
    return
  want = _reference(models, name, attention, embedding, full_depth=outcome.full_depth)
  _compare(got, want, outcome, cell)
  if fmt == "openvino_f32":
    import openvino as ov

    from official_albert.serving import openvino_ir
    ir = ov.Core().read_model(folder + "/" + openvino_ir.XML_NAME)
    assert [p.get_any_name() for p in ir.inputs] == openvino_ir.input_names(head)
    assert all(p.get_partial_shape()[0].is_dynamic and p.get_partial_shape()[-1].is_dynamic for p in ir.inputs)
  if fmt in ("openvino_f32", "litert"):
    # Dynamic shapes: another batch size and a shorter sequence run on the same file.
    short = {k: v[:1, ..., :9] if v.ndim > 1 and k != "masked_lm_positions" else v[:1] for k, v in inputs.items()}
    if "block_sparse" != attention:
      key = sorted(set(got) & set(want) - {"exit_iteration"})[0]
      np.testing.assert_allclose(run(short)[key], _short_reference(models, name, attention, short)[key], atol=1e-4,
                                 rtol=0)
