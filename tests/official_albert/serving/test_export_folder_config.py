"""An export folder's model_config.json reads back as the exported model's config (OpenVINO and LiteRT share
`openvino_export.write_folder` and `export_folder.ExportFolder`).

It was written with `config.to_dict()`, without the native marker, and read by key detection, which took it for an
original-release `albert_config.json` (where "gelu" is the tanh form): an HF model's exact-erf "gelu" was served as
"gelu_new". Checked here on the folder writer with a stand-in model file (no runtime needed), and on a folder written
the old way (no marker), which the reader still gets right.
"""

import os
import types

from official_albert import AlbertConfig
from official_albert import file_io
from official_albert.serving import export_folder
from official_albert.serving import openvino_export
from official_albert.serving.export_spec import ExportSpec
from official_albert.serving.export_spec import LoadedExport

CONFIG = AlbertConfig(vocab_size=97, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=32, hidden_act="gelu")  # exact erf


def _write(export_dir):
  spec = ExportSpec(model_dir="", export_dir=str(export_dir), head="classifier")
  loaded = LoadedExport(model=types.SimpleNamespace(config=CONFIG), spm_model_file=None, tokenizer=None, labels=None,
                        multi_label=False, threshold=0.5, label_file=None)
  write_model_file = lambda tmp: open(os.path.join(tmp, "model.tflite"), "wb").close()  # noqa: E731
  openvino_export.write_folder(spec, loaded, write_model_file, {"head": "classifier"})


def test_an_exported_folder_reads_back_the_models_config(tmp_path):
  _write(tmp_path / "export")
  folder = export_folder.ExportFolder(str(tmp_path / "export"), {"head": "classifier"})
  assert folder.config == CONFIG and folder.config.hidden_act == "gelu"
  path = tmp_path / "export" / export_folder.MODEL_CONFIG
  assert AlbertConfig.from_json_file(str(path)) == CONFIG  # key detection too: the file says it is native


def test_a_folder_written_without_the_native_marker_reads_back_the_models_config(tmp_path):
  _write(tmp_path / "export")
  file_io.atomic_write_json(str(tmp_path / "export" / export_folder.MODEL_CONFIG), CONFIG.to_dict())  # the old file
  assert export_folder.ExportFolder(str(tmp_path / "export"), {"head": "classifier"}).config == CONFIG
