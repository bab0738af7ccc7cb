"""`distribute.raise_together`: a start-up check that fails on one worker only (its own input positions) stops every
worker of the job, not that one alone while the others wait in their next collective (review of 4d3e282)."""

import pytest

from official_albert.training import distribute


def _fails():
  raise ValueError("worker 1's positions were taken over other files")


def test_the_failing_worker_raises_its_own_error_and_the_others_a_pointer():
  votes = []
  with pytest.raises(ValueError, match="other files"):
    distribute.raise_together(_fails, lambda failed: votes.append(failed) or failed, "see the other log")
  with pytest.raises(ValueError, match="see the other log"):  # its own check passed; the job's vote says stop
    distribute.raise_together(lambda: None, lambda failed: votes.append(failed) or True, "see the other log")
  distribute.raise_together(lambda: None, lambda failed: votes.append(failed) or failed, "unused")
  assert votes == [True, False, False]  # every worker votes, whatever its check gave
