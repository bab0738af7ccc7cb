"""`qa_settings.resolved_qa_settings` warns once, not on every call, that the run's question cap leaves no context
piece in shorter windows (review s58): `pipelines.question_answering` resolves the settings on every call, so a loop
of calls on a folder at a short max_seq_length logged the same warning once per call."""

import logging
import types

from official_albert.serving import qa_settings

SHORT = "leaves no context piece"


def _run_dir(folder, max_query_length=64):
  folder.mkdir()
  (folder / "params.yaml").write_text(f"task:\n  doc_stride: 128\n  max_query_length: {max_query_length}\n",
                                      encoding="utf-8")
  return str(folder)


def _warnings(caplog):
  return [r for r in caplog.records if r.levelno == logging.WARNING and SHORT in r.getMessage()]


def test_two_calls_on_a_folder_warn_once(tmp_path, caplog):
  run = _run_dir(tmp_path / "run")
  with caplog.at_level(logging.WARNING, logger=qa_settings.logger.name):
    first = qa_settings.resolved_qa_settings(None, run, 48)
    second = qa_settings.resolved_qa_settings(None, run, 48)
  assert first == second and first["max_query_length"] < 64  # (fitted to the length both times)
  assert len(_warnings(caplog)) == 1, caplog.text
  assert _warnings(caplog)[0].getMessage().startswith(f"{run}: the run recorded max_query_length=64")


def test_another_folder_or_length_is_still_said(tmp_path, caplog):
  """Once per folder and length: another folder's too-long cap, or the same folder at another short length (whose
  fitted windows differ), is news; a model object without a folder (an export's recorded settings) is keyed by
  the object."""
  run, other = _run_dir(tmp_path / "run"), _run_dir(tmp_path / "other", 40)
  export = types.SimpleNamespace(settings={"doc_stride": 128, "max_query_length": 64})
  with caplog.at_level(logging.WARNING, logger=qa_settings.logger.name):
    for _ in range(2):
      qa_settings.resolved_qa_settings(None, run, 48)
      qa_settings.resolved_qa_settings(None, run, 32)
      qa_settings.resolved_qa_settings(None, other, 32)
      qa_settings.resolved_qa_settings(export, None, 48)
      qa_settings.resolved_qa_settings(None, run, 128)  # (fits: no warning)
  assert len(_warnings(caplog)) == 4, caplog.text
