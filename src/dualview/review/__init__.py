"""Human validation of synthesized dual views (``dualview review``).

- `items`: what a reviewer sees (query, both instructions, P+, N*, other negatives, the
  judge's verdict), read from a record file, a run folder or the gold set;
- `sample`: seeded stratified sampling, so a verdict set estimates the whole file;
- `store`: the append-only verdict file (one JSON line per verdict, never rewritten);
- `stats`: inversion accuracy with a Wilson interval, failure modes, judge-vs-human
  agreement (Cohen's kappa) and reviewer calibration on gold items;
- `app`: the local web page (Starlette, served by uvicorn).
"""
