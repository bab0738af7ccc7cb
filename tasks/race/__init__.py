"""RACE (reference §5.3): data.py (reading the release layout, the 4-option encoding, records, accuracy per level; no
Keras of its own: `data_prep.create_finetuning_data` calls it) and task.py (the fine-tuning task). Registers the `race`
task."""

from official_albert.tokenization.choices import qa_text
from tasks.race.data import compute_metrics
from tasks.race.data import convert_example
from tasks.race.data import convert_examples
from tasks.race.data import LEVELS
from tasks.race.data import NUM_CHOICES
from tasks.race.data import RaceDataError
from tasks.race.data import RaceExample
from tasks.race.data import RaceRecords
from tasks.race.data import read_examples
from tasks.race.data import read_race_file
from tasks.race.data import split_dir
from tasks.race.data import SPLITS
from tasks.race.task import race_feature_spec
from tasks.race.task import RaceTask
from tasks.race.task import RaceTaskConfig
