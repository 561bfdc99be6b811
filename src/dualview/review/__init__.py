"""Human validation of synthesized dual views (``dualview review``).

- :mod:`items`: what a reviewer sees (query, both instructions, P+, N*, other negatives, the
  judge's verdict), read from a record file, a run folder or the gold set;
- :mod:`sample`: seeded stratified sampling, so a verdict set estimates the whole file;
- :mod:`store`: the append-only verdict file (one JSON line per verdict, never rewritten);
- :mod:`stats`: inversion accuracy with a Wilson interval, failure modes, judge-vs-human
  agreement (Cohen's kappa) and reviewer calibration on gold items;
- :mod:`app`: the local web page (Starlette, served by uvicorn).
"""
