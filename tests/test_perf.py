"""Analytic FLOPs, GPU peaks by name, and the trainer's precision/worker/chunk settings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from transformers import BertConfig, BertModel

from dualview.perf import (
    ModelShape,
    ThroughputMeter,
    encoder_flops,
    peak_tflops,
    training_flops,
)
from dualview.train.config import TrainConfig
from dualview.train.trainer import resolve_precision, resolve_workers


def test_model_shape_counts_linear_weights_without_embeddings_or_pooler() -> None:
    config = BertConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=256,
    )
    shape = ModelShape.of(BertModel(config))
    assert shape.linear_params == 3 * (4 * 64 * 64 + 2 * 64 * 256)
    assert (shape.layers, shape.attention_dim) == (3, 64)


def test_encoder_flops_formula() -> None:
    shape = ModelShape(linear_params=1000, layers=2, attention_dim=8)
    lengths = [3, 5]
    forward = 2 * 1000 * 8 + 4 * 2 * 8 * (9 + 25)
    assert encoder_flops(shape, lengths) == forward
    assert encoder_flops(shape, lengths, passes=4) == 4 * forward
    assert encoder_flops(shape, lengths, attention=False) == 2 * 1000 * 8


def test_peaks_by_device_name() -> None:
    assert peak_tflops("NVIDIA H100 80GB HBM3") == pytest.approx(989.4)
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert peak_tflops("NVIDIA H200") == pytest.approx(989.4)
    assert peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops(None) is None and peak_tflops("Some CPU") is None


def test_meter_reports_padding_and_no_mfu_without_peak() -> None:
    meter = ThroughputMeter(peak=None)
    meter.add(tokens=75, flops=1e6, padded_tokens=100)
    report = meter.report()
    assert report["padding"] == pytest.approx(0.25) and report["mfu"] is None
    assert report["tokens_per_s"] > 0


def test_mfu_counts_forward_and_backward_hfu_adds_the_gradcache_pass() -> None:
    shape = ModelShape(linear_params=1000, layers=2, attention_dim=8)
    lengths = [5, 3]
    forward = encoder_flops(shape, lengths)
    assert training_flops(shape, lengths) == (3 * forward, 3 * forward)
    model, hardware = training_flops(shape, lengths, rerun=lengths)
    assert model == 3 * forward and hardware == pytest.approx(4 * forward)
    # a text whose chunk kept its graph runs once: only the other is counted again
    _, partial = training_flops(shape, lengths, rerun=[3])
    assert partial == pytest.approx(3 * forward + encoder_flops(shape, [3]))
    meter = ThroughputMeter(peak=1e-9)  # TFLOP/s: any positive peak makes both ratios
    meter.add(tokens=8, flops=model, hardware_flops=hardware)
    report = meter.report()
    assert report["hfu"] == pytest.approx(report["mfu"] * 4 / 3, rel=1e-2)
    assert report["hw_tflops"] >= report["tflops"] > 0
    meter.reset()
    meter.add(tokens=8, flops=model)  # no recomputation: HFU = MFU
    plain = meter.report()
    assert plain["hfu"] == plain["mfu"] and plain["hw_tflops"] == plain["tflops"]


def test_cpu_defaults() -> None:
    assert resolve_precision("auto") == "no"  # no GPU in CI
    assert resolve_precision("bf16") == "bf16"
    assert resolve_workers("auto") == 0 and resolve_workers(3) == 3


@pytest.mark.parametrize(
    ("value", "ok"), [("auto", True), (16, True), (None, True), (0, False), ("big", False)]
)
def test_gradcache_chunk_size_values(value, ok: bool) -> None:
    data = {"data": {"train_file": "x.jsonl"}, "output_dir": "o", "gradcache_chunk_size": value}
    if ok:
        assert TrainConfig.model_validate(data).gradcache_chunk_size == value
    else:
        with pytest.raises(ValidationError):
            TrainConfig.model_validate(data)
