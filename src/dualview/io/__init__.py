"""File input and output under every stage: strict readers with located errors, atomic file
and folder writers, append-only writers for resumable stages, and fault-injection points.

Modules: `files` (reading users' files), `atomic` (write-then-rename files and JSONL),
`append` (append-only JSONL with torn-tail repair), `folder` (whole folders swapped in),
`faults` (seeded kill points for the crash tests).
"""
