"""The paper's ablations at small scale, in one command (issue 33; README.md here has the measured tables).

  python -m experiments.projects.ablations.study --study=table3|table4|table5|dropout|smoothness --output_dir=OUT \
      [--corpus=FILE,...] [--seeds=3] [--steps=N] [--downstream=order,sst-2,mrpc --glue_dir=DIR] [--quick]

Each variant of a study (`studies`) is pretrained on the same records (`data`), for the same steps, from the same
seeds (`runner`), then scored on held-out MLM / NSP / SOP records — both sentence tasks for every model — and on a
small downstream average (`downstream`). Outputs (`report`): `OUT/results.json` (every number, seed and setting;
for every run its `objective` and held-out `masked_lm_accuracy`, `nsp_accuracy`, `sop_accuracy`), `OUT/table.md`
(the paper's layout, the paper's numbers beside ours as mean ± std), `OUT/curves.png` and, for studies with an
all-shared and a not-shared variant, `OUT/smoothness.png` (Figure 1). A killed study resumes where it stopped.
"""
