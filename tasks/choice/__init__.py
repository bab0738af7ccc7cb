"""`text_multiple_choice`: the task (task.py), its config (config.py) and its rows and records (data.py)."""

from tasks.choice.config import TextMultipleChoiceConfig
from tasks.choice.task import TextMultipleChoiceTask

__all__ = ["TextMultipleChoiceConfig", "TextMultipleChoiceTask"]
