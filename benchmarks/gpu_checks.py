"""The new training code paths against the padded path, on the device they are meant for.

On a small random BERT (``--tiny``: 2 layers of 64 dims on CPU; else 4 layers of bert-base
width, bf16 on CUDA), dropout off, one batch of texts of mixed lengths, through the real
`dualview.models.bi_encoder.BiEncoder`:

- ``padded``: the current path (SDPA with a padding mask), the reference, in fp32;
- ``padded-bf16`` (CUDA): the same in bf16: the rounding floor the others are held to;
- ``packed-nested``: `dualview.models.unpadded` through SDPA on nested tensors;
- ``packed-torch_flash`` (CUDA): through PyTorch's flash-attention varlen kernel;
- ``bucket64``: chunk width padded up to a multiple of 64 (``pad_multiple``);
- ``compile-layers``: ``compile: layers`` (`dualview.models.compiled`), inductor on CUDA,
  ``aot_eager`` on CPU (where inductor's compile takes minutes); dropout is off, so it is
  held to the eager result.

For each: the relative error ``|x - ref| / |ref|`` of the embeddings and of the parameter
gradients of a fixed random projection of them, and the median time of forward + backward.
A path that raises is recorded with its error. Writes ``--out`` (JSON) and prints a table.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import machine_end, machine_start

#: Backbone configs: on CUDA bert-base width (head size 64, as flash needs), on CPU tiny.
CONFIGS = {
    "cuda": {"hidden_size": 768, "num_hidden_layers": 4, "num_attention_heads": 12,
             "intermediate_size": 3072},
    "cpu": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": 128},
}  # fmt: skip


def build(folder: Path, device: str, tokenizer: str) -> Path:
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from dualview.resources import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path(tokenizer))
    config = AutoConfig.for_model(
        "bert", vocab_size=len(tok), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=512, **CONFIGS[device],
    )  # fmt: skip
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def texts_tokens(model: Any, n: int, device: str) -> Any:
    import torch

    from dualview.models.tokens import TokenizedTexts

    generator = torch.Generator().manual_seed(1)
    top = 500 if device == "cuda" else 60
    lengths = torch.randint(8, top, (n,), generator=generator)
    vocab = int(model.backbone.config.vocab_size)
    ids = [torch.randint(1000, vocab, (int(k),), generator=generator).tolist() for k in lengths]
    return TokenizedTexts.from_lists([[101, *x[:-2], 102] for x in ids])


def run_path(model: Any, tokens: Any, multiple: int, reps: int) -> dict[str, Any]:
    """Embeddings, gradients and the median seconds of forward + backward."""
    import torch

    cuda = next(model.parameters()).is_cuda
    weight = torch.randn(model.dim, generator=torch.Generator().manual_seed(2)).to(
        next(model.parameters()).device
    )
    times = []
    for _ in range(reps):
        model.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        inputs = model.pad(tokens, range(len(tokens)), "document", multiple)
        embeddings = model.embed(inputs)
        (embeddings.float() @ weight).square().sum().backward()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    grads = torch.cat([p.grad.float().flatten() for p in model.parameters() if p.grad is not None])
    return {"embeddings": embeddings.detach().float(), "grads": grads, "times": times}


def relative(a: Any, b: Any) -> float:
    return float((a - b).norm() / b.norm().clamp(min=1e-12))


def variants(device: str) -> list[tuple[str, dict[str, Any]]]:
    cuda = device == "cuda"
    out = [("padded", {}), ("bucket64", {"multiple": 64}), ("packed-nested", {"kernel": "nested"})]
    if cuda:
        out.insert(1, ("padded-bf16", {"bf16": True}))
        out += [
            ("packed-nested-bf16", {"kernel": "nested", "bf16": True}),
            ("packed-torch_flash-bf16", {"kernel": "torch_flash", "bf16": True}),
            ("compile-layers-bf16", {"compile": "inductor", "bf16": True}),
        ]
    else:
        out.append(("compile-layers", {"compile": "aot_eager"}))
    return out


def make_model(base: Any, spec: dict[str, Any]) -> Any:
    import torch

    from dualview.models import unpadded
    from dualview.models.compiled import compile_backbone

    model = copy.deepcopy(base)
    if "kernel" in spec:
        model.config = model.config.model_copy(update={"unpadded": True})
        unpadded.enable(model.backbone, spec["kernel"])
    if spec.get("bf16"):
        model.to(torch.bfloat16)
    if "compile" in spec:
        compile_backbone(model.backbone, "layers", backend=spec["compile"])
    return model


def check(name: str, base: Any, tokens: Any, spec: dict, refs: dict, reps: int) -> dict:
    """One path against the fp32 padded reference (and, in bf16, the bf16 padded path)."""
    result = run_path(make_model(base, spec), tokens, spec.get("multiple", 8), reps)
    refs.setdefault(name, result)
    out = {
        "name": name,
        "embeddings_rel_err": relative(result["embeddings"], refs["padded"]["embeddings"]),
        "grads_rel_err": relative(result["grads"], refs["padded"]["grads"]),
        "fwd_bwd_ms_median": round(1000 * statistics.median(result["times"][1:]), 2),
    }
    floor = refs.get("padded-bf16")
    if spec.get("bf16") and floor is not None and name != "padded-bf16":
        out["vs_padded_bf16"] = {
            "embeddings": relative(result["embeddings"], floor["embeddings"]),
            "grads": relative(result["grads"], floor["grads"]),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny", action="store_true", help="CPU, tiny model")
    parser.add_argument("--tokenizer", default="embedded:minilm", help="or a tokenizer folder")
    parser.add_argument("--texts", type=int, default=None)
    parser.add_argument("--reps", type=int, default=None)
    args = parser.parse_args()
    import torch

    from dualview.models.bi_encoder import BiEncoder
    from dualview.models.config import ModelConfig

    info = machine_start()
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    n = args.texts or (64 if device == "cuda" else 8)
    reps = max(2, args.reps or (6 if device == "cuda" else 2))
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-checks-") as tmp:
        folder = build(Path(tmp) / "bert", device, args.tokenizer)
        config = ModelConfig(name_or_path=str(folder), pooling="cls", document_max_length=512)
        base = BiEncoder(config).to(device).train()
        tokens = texts_tokens(base, n, device)
        refs: dict[str, Any] = {}
        for name, spec in variants(device):
            started = time.perf_counter()
            try:
                results.append(check(name, base, tokens, spec, refs, reps))
            except Exception as exc:  # a failing path is a result, not the end of the run
                results.append({"name": name, "status": "failed", "detail": repr(exc)[:400]})
            result = results[-1]
            result["wall_s"] = round(time.perf_counter() - started, 1)
            if "embeddings_rel_err" in result:
                result["detail"] = (
                    f"emb {result['embeddings_rel_err']:.2e} grad {result['grads_rel_err']:.2e} "
                    f"{result['fwd_bwd_ms_median']} ms"
                )
            print(f"{time.strftime('%H:%M:%S')} check {name}: {result}", flush=True)
            write(args.out, device, n, results, info)  # after each: a kill keeps the rest
    return 0


def write(out: Path, device: str, n: int, results: list[dict[str, Any]], info: dict) -> None:
    data = {"benchmark": "gpu_checks", "device": device, "texts": n, "checks": results,
            "machine": machine_end(info)}  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
