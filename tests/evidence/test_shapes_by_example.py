"""A question shape detected by similarity to example questions (the third detector beside keywords and
patterns), with the real default embedder: a paraphrase matches, an unrelated question does not."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from evidex.config import Config, ShapeFamily, ShapeRule, load_config
from evidex.embedding.protocol import Embedder, Vectors
from evidex.engine import Engine
from evidex.errors import ConfigError
from evidex.evidence.plan import PlanSource, QuestionShape, RequiredFamily, plan_question
from evidex.pipeline import SearchRequest

ACCESS = ShapeRule(name="emergency-access", families=(ShapeFamily("breakglass", "break-glass procedure",
                                                                  label="breakglass"),),
                   examples=("How do I get emergency admin access when single sign-on is down?",
                             "What is the procedure to use the root credentials in an outage?"))  # default 0.7


class CountingEmbedder:
    """The real embedder, counting query encodings (the shape check must not add one)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.queries: list[str] = []

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return self.inner.embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_documents(texts)


@pytest.fixture
def engine(tmp_path: Path, embedder: Embedder, cache_dir: Path) -> Engine:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "breakglass.md").write_text("---\nevidence_family: breakglass\n---\n# Break-glass\n\n"
                                          "Open the sealed envelope and log every use of the root account.\n")
    (corpus / "bread.md").write_text("# Bread\n\nBake the loaf at 220 degrees for forty minutes.\n")
    config = Config().replace(index={"path": str(tmp_path / "idx")}, embedding={"cache_dir": str(cache_dir)},
                              shapes=(ACCESS,))
    e = Engine.open(config, embedder=CountingEmbedder(embedder))
    e.ingest([corpus])
    return e


def test_a_paraphrase_of_an_example_gets_the_shapes_families(engine: Engine) -> None:
    outcome = engine.run(SearchRequest("Single sign-on is down: how does an admin get emergency access?"))
    assert (outcome.plan.source, outcome.plan.shape) == (PlanSource.SHAPE, "emergency-access")
    assert [f.name for f in outcome.plan.families] == ["breakglass"]
    note = next(n for n in outcome.plan.notes if n.startswith("similarity to the closest example"))
    assert float(note.rsplit(" ", 1)[1]) >= 0.7
    assert [f.status for f in outcome.families] == ["covered"]


def test_an_unrelated_question_falls_through_to_the_automatic_plan(engine: Engine) -> None:
    outcome = engine.run(SearchRequest("At what temperature should the loaf be baked?"))
    assert outcome.plan.source is not PlanSource.SHAPE


def test_the_question_is_encoded_once_for_the_shape_check_and_retrieval(engine: Engine) -> None:
    counting = engine.embedder
    assert isinstance(counting, CountingEmbedder)
    before = len(counting.queries)
    engine.run(SearchRequest("Single sign-on is down: how does an admin get emergency access?"))
    assert counting.queries[before:] == ["Single sign-on is down: how does an admin get emergency access?"]


def test_similarity_only_counts_for_a_shape_with_examples() -> None:
    shape = QuestionShape(name="s", families=(RequiredFamily("f", "q", label="f"),), examples=("an example",),
                          min_similarity=0.8)
    assert shape.matches("anything", similarity=0.81)
    assert not shape.matches("anything", similarity=0.79)
    assert not shape.matches("anything")  # no encoder, no similarity: it cannot match by its examples
    without = QuestionShape(name="t", families=shape.families, keywords=("rotate keys",), min_keywords=1)
    assert not without.matches("bake bread", similarity=0.99)
    plan = plan_question("rotate keys", shapes=(shape, without), similarity=lambda s: 0.1)
    assert plan.shape == "t" and plan.notes == ()


@pytest.mark.parametrize(("extra", "names"), [
    ("examples = [1]", r"shapes\[0\]\.examples"),
    ("examples = ['']", r"shapes\[0\]\.examples"),
    ("examples = ['q']\nmin_similarity = 1.5", r"shapes\[0\]\.min_similarity"),
    # A string where an array belongs had been read letter by letter: every question matched "unseal".
    ("keywords = 'unseal'", r"shapes\[0\]\.keywords must be an array"),
    ("patterns = '(?i)outage'", r"shapes\[0\]\.patterns must be an array"),
    ("keywords = ['the', 'unseal']\nmin_keywords = 1", r"'the' has no searchable word"),
    ("keywords = ['unseal', 'lockbox']\nmin_keywords = 'two'", r"min_keywords must be a whole number"),
    ("keywords = ['unseal', 'lockbox']\nmin_keywords = 0", r"min_keywords must be a whole number"),
    ("keywords = ['unseal', 'lockbox']\nmin_keywords = 3", r"could never match"),
    ("min_keywords = 1", r"needs a detector"),
])
def test_bad_detectors_are_config_errors(tmp_path: Path, extra: str, names: str) -> None:
    path = tmp_path / "evidex.toml"
    path.write_text(f"[[shapes]]\nname = 'x'\n{extra}\n  [[shapes.families]]\n  name = 'f'\n  label = 'f'\n"
                    "  rescue_query = 'q'\n")
    with pytest.raises(ConfigError, match=names):
        load_config(path, env={})


def test_examples_are_read_from_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "evidex.toml"
    path.write_text("[[shapes]]\nname = 'x'\nexamples = ['how do I rotate keys?']\nmin_similarity = 0.8\n"
                    "  [[shapes.families]]\n  name = 'f'\n  label = 'f'\n  rescue_query = 'q'\n")
    shape = load_config(path, env={}).shapes[0]
    assert (shape.examples, shape.min_similarity) == (("how do I rotate keys?",), 0.8)
