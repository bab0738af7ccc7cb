"""The model: Keras layers (`layers/`), the `AlbertEncoder` (encoder.py) and the pretraining and task models
(models.py). Importing `models` registers the Keras classes for `keras.saving.load_model`."""
