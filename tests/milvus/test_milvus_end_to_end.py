"""The whole pipeline (plan, gate, families, signals) unchanged above Milvus Lite, against the SQLite store.

Ranks may differ where BM25 statistics differ (Milvus Lite computes them per segment, over retired rows
too, and does not stem), so the comparison is on decisions: what was admitted or rejected, which families
are covered, the recommendation.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from evidex.config import load_config
from evidex.engine import Engine

AT = datetime(2026, 11, 30, tzinfo=UTC)
COMPOSITE = ("A new `checkout` service needs its Postgres password from Vaultline. How should the pod authenticate "
             "without a long-lived token, how does the secret get into the container and get renewed, and which "
             "role grant lets the team read only the secret path it needs?")
BREAK_GLASS = "What is the break-glass procedure for the Vaultline root token?"


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[dict[str, Engine]]:
    root = tmp_path_factory.mktemp("e2e")
    sample = resources.files("evidex").joinpath("sample")
    with resources.as_file(sample) as sample_dir:
        base = load_config(sample_dir / "evidex.toml", env={})
        built = {
            "sqlite": Engine.open(base.replace(index={"path": str(root / "sqlite")}), embedder=embedder),
            "milvus": Engine.open(base.replace(index={"path": str(root / "milvus"), "backend": "milvus",
                                                      "uri": str(root / "milvus.db")}), embedder=embedder),
        }
        for engine in built.values():
            engine.ingest([Path(sample_dir) / "handbook"])
        yield built
        for engine in built.values():
            engine.close()


def decision(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "action": result["decision"]["recommendation"]["action"],
        "stop": result["decision"]["stop_condition"],
        "families": [(f["name"], f["status"]) for f in result["families"]],
        "sources": sorted({g["source"] for g in result["evidence"]}),
    }


@pytest.mark.slow
def test_the_same_corpus_gives_the_same_index(engines: dict[str, Engine]) -> None:
    a, b = (engines[n].stats() for n in ("sqlite", "milvus"))
    assert (a["documents"], a["chunks"]) == (b["documents"], b["chunks"])


@pytest.mark.slow
def test_a_composite_question_is_decided_alike(engines: dict[str, Engine]) -> None:
    sqlite, milvus = (engines[n].search_with_reasoning(COMPOSITE, retrieved_at=AT) for n in ("sqlite", "milvus"))
    assert decision(milvus)["action"] == decision(sqlite)["action"] == "proceed"
    ours, theirs = set(decision(sqlite)["sources"]), set(decision(milvus)["sources"])
    assert len(ours & theirs) >= 0.7 * len(ours), (ours, theirs)
    for result in (sqlite, milvus):  # the gate is on in both: no restricted page is evidence
        assert all("security-team" not in c["provenance"]["access_labels"]
                   for g in result["evidence"] for c in g["chunks"])
        assert "RESTRICTED-MARKER" not in str(result)


@pytest.mark.slow
def test_restricted_only_evidence_stops_on_both(engines: dict[str, Engine]) -> None:
    sqlite, milvus = (decision(engines[n].search_with_reasoning(BREAK_GLASS, retrieved_at=AT))
                      for n in ("sqlite", "milvus"))
    assert sqlite["action"] == milvus["action"] == "stop"
    assert sqlite["stop"] == milvus["stop"] == "stop-no-fresh-authorized-citable-source"
    assert sqlite["families"] == milvus["families"] == [("breakglass", "found-but-rejected")]
