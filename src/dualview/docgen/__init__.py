"""Documentation generated from committed result files (`dualview.docgen.results_doc`).

Above `dualview.report` and `dualview.review` (it renders the files of both, and of
``dualview bench-synth``), beside `dualview.hub`."""
