"""official_albert's task families: pretraining (MLM + SOP), GLUE, SQuAD, RACE and the classification base.

Each task module registers its `Task` with `official_albert.training.base_task.register_task`.
"""

PROJECT = "official_albert"  # marks this top-level package as official_albert's (see cli.require_project_package)
