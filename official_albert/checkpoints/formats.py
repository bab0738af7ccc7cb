"""The names shared by conversion, export and the pipelines: checkpoint formats, model types, SentencePiece files.

Kept free of TensorFlow so that the binaries can list them in their flags before TensorFlow starts.
"""

from official_albert import model_directory

# Directory formats read and written by `official_albert.convert_checkpoint` (see loading.detect_format).
FORMATS = ("tf1", "hf", "native")
# One of our models per name (loading.build_model): the heads of conversion (--model_type) and export (--head).
MODEL_TYPES = ("pretrainer", "encoder", "classifier", "token_classifier", "span", "squad_v2", "multiple_choice")
# SentencePiece model file names looked for beside a checkpoint (ours, then the original release's).
SPM_NAMES = model_directory.SPM_FILES
