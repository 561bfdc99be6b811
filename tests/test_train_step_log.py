"""The printed training line: value-unit items separated by ' · ', keys of train_log.jsonl."""

from __future__ import annotations

from dualview.train.step_log import format_step

RECORD = {
    "step": 3,
    "loss": 0.36891,
    "lr": 1.8e-05,
    "documents_encoded": 71,
    "tokens_per_s": 380.4,
    "tflops": 0.01,
    "mfu": None,
    "peak_memory_gib": None,
}


def test_cpu_line_reads_value_then_unit() -> None:
    line = format_step(RECORD, 6)
    assert (
        line == "step 3/6 · loss 0.3689 · lr 1.8e-05 · 71 docs · 380 tok/s · 0.0 TFLOP/s · MFU n/a"
    )


def test_gpu_line_shows_mfu_and_memory() -> None:
    record = {
        **RECORD,
        "tokens_per_s": 123456.0,
        "tflops": 41.27,
        "mfu": 0.4172,
        "peak_memory_gib": 12.345,
    }
    items = format_step(record, 100).split(" · ")
    assert items[4:] == ["123,456 tok/s", "41.3 TFLOP/s", "MFU 41.7%", "12.3 GiB peak"]
