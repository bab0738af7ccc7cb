r"""Fill-mask from a model directory, as in the albert-large-v2 model card.

  python -m official_albert.fill_mask --model_dir=/tmp/albert_large --text="Hello I'm a [MASK] model." --top_k=5
  python -m official_albert.fill_mask --saved_model_dir=/tmp/albert_large_sm --text="Hello I'm a [MASK] model."

With `--saved_model_dir`, the query is answered by a pretrainer SavedModel of `export_saved_model` (tokenized
in-graph); otherwise by the checkpoint in `--model_dir`.

`--do_lower_case` defaults to the model directory's own record (tokenizer_config.json / params.yaml), as
`pipelines.fill_mask` does, so a cased model reads cased text; it is refused with `--saved_model_dir`, whose graph
tokenizes with the casing it was exported with.

Prints one JSON object per prediction (`sequence`, `score`, `token`, `token_str`), best first.
"""

import json

from absl import flags

from official_albert import cli


def run(model_dir, texts, top_k=5, do_lower_case=None, saved_model_dir=None):
  """Returns the printed lines: `# text` then one JSON object per prediction, best first (per mask).

  do_lower_case None reads the text as `model_dir` was trained (its recorded casing); True / False override it.
  """
  from official_albert.serving import pipelines  # noqa: PLC0415 (binary: TF after launch)
  if (model_dir is None) == (saved_model_dir is None):
    raise ValueError("Pass exactly one of --model_dir and --saved_model_dir.")
  if saved_model_dir and do_lower_case is not None:
    raise ValueError(f"--do_lower_case={do_lower_case} does not apply with --saved_model_dir={saved_model_dir}: the "
                     "SavedModel tokenizes in its graph with the casing it was exported with. Drop --do_lower_case.")
  if saved_model_dir:
    results = pipelines.fill_mask_saved_model(saved_model_dir, list(texts), top_k=top_k)
  else:
    results = pipelines.fill_mask(model_dir, list(texts), top_k=top_k, do_lower_case=do_lower_case)
  lines = []
  for text, result in zip(texts, results):
    per_mask = result if result and isinstance(result[0], list) else [result]
    for m, preds in enumerate(per_mask):
      lines.append(f"# {text}" + (f" (mask {m + 1})" if len(per_mask) > 1 else ""))
      lines.extend(json.dumps(p, ensure_ascii=False) for p in preds)
  return lines


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  flags.DEFINE_string("model_dir", None, "Model directory with spiece.model (native, HF or original release).",
                      flag_values=fv)
  flags.DEFINE_string("saved_model_dir", None, "Pretrainer SavedModel (instead of --model_dir).", flag_values=fv)
  flags.DEFINE_multi_string("text", None, "Text containing [MASK] (repeat the flag for several texts).",
                            flag_values=fv)
  flags.DEFINE_integer("top_k", 5, "Predictions per [MASK].", flag_values=fv)
  flags.DEFINE_bool("do_lower_case", None, "Lower-case the text (default: as --model_dir was trained, from its "
                    "tokenizer_config.json / params.yaml; not with --saved_model_dir).", flag_values=fv)
  flags.mark_flags_as_required(["text"], flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS):
  del argv
  print("\n".join(run(fv.model_dir, fv.text, fv.top_k, fv.do_lower_case, fv.saved_model_dir)))


def console_main() -> None:
  """The `albert-fill-mask` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
