"""official_albert's offline data tools: the Python-docs corpus, SentencePiece training, pretraining records (local
and Apache Beam) and fine-tuning records. Each module with a `main` is a binary (`python -m data_prep.<name>`)."""

PROJECT = "official_albert"  # marks this top-level package as official_albert's (see cli.require_project_package)
