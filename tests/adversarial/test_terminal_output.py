"""No control sequence from a document reaches the terminal: titles, text, headings, provenance, file names and
dead-letter reasons are printed without ESC, CSI, OSC, the other C0/C1 controls and bidirectional overrides."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from evidex.interfaces import cli_runtime
from evidex.interfaces.cli import app
from evidex.interfaces.render import printable

Invoke = Callable[..., Result]

CLEAR, RED, RESET, RETITLE = "\x1b[2J", "\x1b[31m", "\x1b[0m", "\x1b]0;owned\x07"
# YAML writes ESC as \e and BEL as \a inside double quotes (a raw ESC in front matter is a YAML error).
HOSTILE_PAGE = (
    "---\n"
    "title: \"Rotate\\e[2J keys \\e[31mnow\\e[0m\\e]0;owned\\a\"\n"
    "access_labels: [eng]\n"
    "evidence_family: \"keys\\e[31m\"\n"
    "citation_uri: https://docs.example.com/keys\n"
    "---\n"
    f"# Rotate keys{CLEAR}\n\n"
    f"Rotate the signing keys {RED}every ninety days{RESET}{RETITLE} with keyctl rotate.\u202e gnirts\x9b2J\r\n"
)
# Anything a terminal would act on: ESC and the other C0 controls but tab and newline, DEL, C1, bidi overrides.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def invoke(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_runtime.out, "_width", 200)
    runner = CliRunner()
    env = {"EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir), "EVIDEX_CONFIG": None}

    def run(*args: str) -> Result:
        return runner.invoke(app, [*args, "--index", str(tmp_path / "idx")], env=env)

    return run


def test_no_control_sequence_from_a_document_reaches_the_terminal(invoke: Invoke, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "keys.md").write_text(HOSTILE_PAGE, encoding="utf-8")
    (corpus / f"broken{RED}.md").write_text(f"---\ntitle: [unclosed{CLEAR}\n---\nx\n", encoding="utf-8")
    outputs = {"ingest": invoke("ingest", str(corpus))}
    record = re.search(r"id=(\w+)", invoke("search", "rotate signing keys").output)
    assert record is not None
    outputs |= {
        "search": invoke("search", "rotate signing keys"),
        "query": invoke("query", "how do I rotate the signing keys?", "--labels", "eng"),
        "show": invoke("show", record.group(1)),
        "dead-letters": invoke("dead-letters"),
        "stats": invoke("stats"),
    }
    for command, result in outputs.items():
        assert result.exit_code == 0, (command, result.output)
        leaked = sorted({hex(ord(ch)) for ch in CONTROL.findall(result.output)})
        assert not leaked, f"{command} printed {leaked}"
    assert "Rotate keys now" in outputs["search"].output  # the words stay, only the control is gone
    assert "every ninety days with keyctl rotate" in outputs["query"].output
    assert "broken.md" in outputs["ingest"].output and "broken.md" in outputs["dead-letters"].output


@pytest.mark.parametrize(("text", "shown"), [
    ("a\x1b[1;31mb\x1b[0m", "ab"),  # colour (CSI)
    ("a\x1b]0;title\x07b\x1b]8;;http://x\x1b\\c", "abc"),  # window title, hyperlink (OSC, BEL or ST ended)
    ("a\x9b2Jb\x9d0;t\x9cc", "abc"),  # the same as 8-bit C1 controls
    ("a\x1b[2", "a"),  # a sequence cut short
    ("left\u202eright\u2066x\u2069", "leftrightx"),  # bidirectional overrides and isolates
    ("line\r\nnext\tcell\x07\x08\x7f", "line\nnext\tcell"),  # layout kept, the rest dropped
])
def test_printable_keeps_the_words_and_drops_the_control(text: str, shown: str) -> None:
    assert printable(text) == shown
