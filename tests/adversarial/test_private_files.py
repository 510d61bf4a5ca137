"""Index, audit, verification and key files are 0600 in a 0700 folder whatever the umask; a file found more
open is named in a warning."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evidex.engine import Engine
from evidex.interfaces.keys import KeyStore, RateLimiter
from evidex.private_files import private_file

EngineFactory = Callable[..., Engine]

PAGE = ("---\naccess_labels: [eng]\ncitation_uri: https://docs.example.com/rotate\n---\n"
        "# Rotate keys\n\nRotate the signing keys every ninety days with keyctl rotate.\n")


@pytest.fixture(params=[0o022, 0o000], ids=["umask-022", "umask-000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_index_file_is_private_whatever_the_umask(umask: int, make_engine: EngineFactory,
                                                         tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "rotate.md").write_text(PAGE, encoding="utf-8")
    engine = make_engine()
    engine.ingest([corpus])
    engine.search_with_reasoning("how do I rotate the signing keys?", principal=None)
    record = engine.search("rotate signing keys", k=1)[0].chunk.record_id
    engine.verify(record, claim="rotation is every ninety days", by="ana")
    index = engine.config.index_dir
    with KeyStore(index / "keys.sqlite") as keys, RateLimiter(index / "keys.rates.sqlite") as rates:
        keys.create("ci", "ci-bot", ["eng"])
        rates.acquire("ci", 60)
        files = sorted(p.name for p in index.iterdir())
        assert {"index.sqlite", "audit.jsonl", "verifications.sqlite", "keys.sqlite", "keys.rates.sqlite",
                "index.sqlite-wal", "keys.rates.sqlite-wal"} <= set(files), files
        assert {name: oct(mode(index / name)) for name in files} == dict.fromkeys(files, "0o600")
    assert oct(mode(index)) == "0o700"


def test_a_file_found_more_open_is_named_in_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    audit = shared / "audit.jsonl"
    audit.write_text("")
    os.chmod(audit, 0o644)
    with caplog.at_level(logging.WARNING, logger="evidex.files"):
        private_file(audit)
    assert oct(mode(audit)) == "0o644"  # left as the operator made it
    warned = [r.getMessage() for r in caplog.records]
    assert any(str(audit) in m and "mode 644" in m and f"chmod 600 {audit}" in m for m in warned), warned
    assert any(str(shared) in m and f"chmod 700 {shared}" in m for m in warned), warned
