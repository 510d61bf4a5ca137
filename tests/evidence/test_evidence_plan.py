"""Evidence plans without the model: automatic aspects, chaining, configured shapes, aspect focus, and
the plan's JSON round trip."""

from __future__ import annotations

import pytest
from evidence_support import SAMPLE_CONFIG, make_chunk
from hypothesis import given
from hypothesis import strategies as st

from evidex.config import Config, ShapeFamily, ShapeRule, load_config
from evidex.evidence.aspects import entity_spans, is_chained, is_quantity, quoted_strings, sub_questions
from evidex.evidence.plan import (
    EvidencePlan,
    PlanSource,
    QuestionShape,
    RequiredFamily,
    auto_plan,
    explicit_plan,
    focus_plan,
    plan_from_dict,
    plan_question,
)
from evidex.evidence.terms import _term_set, chunk_terms, content_words, stem, terms
from evidex.pipeline import shapes_from_config

# ---- automatic aspects ------------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "aspects"), [
    ("How do I rotate the `payments-pii` key?", ("payments-pii",)),  # an identifier in backticks
    ("Why does maxConnections exceed the limit?", ("maxConnections",)),  # camelCase
    ("What does --pool-size do?", ("--pool-size",)),  # a flag
    ("What does ERR_POOL_EXHAUSTED mean?", ("ERR_POOL_EXHAUSTED",)),  # an error constant
    ('What does "connection budget exceeded" mean for checkout?', ("connection budget exceeded",)),  # quoted
])
def test_identifiers_are_aspects(question: str, aspects: tuple[str, ...]) -> None:
    plan = auto_plan(question)
    assert plan.aspects == aspects
    assert plan.source is PlanSource.AUTO
    assert [f.name for f in plan.families] == list(aspects)
    assert [f.rescue_query for f in plan.families] == list(aspects)
    assert [f.aspect_terms for f in plan.families] == [terms(a) for a in aspects]


def test_identifiers_come_first_then_names() -> None:
    plan = auto_plan("Why does `vl-agent` fail to renew secrets for Tidepool Proxy?")
    assert plan.aspects == ("vl-agent", "Tidepool Proxy")


@pytest.mark.parametrize(("question", "aspects"), [
    # split on "and" only when both sides are multi-word names
    ("Who played in Local H and For Against?", ("Local H", "For Against")),
    ("What did Marie Curie and Pierre Curie discover?", ("Marie Curie", "Pierre Curie")),
    ("Who wrote Kiss and Tell?", ("Kiss and Tell",)),
    ("Is the Northwind Handbook about Vaultline and Tidepool?", ("Northwind Handbook", "Vaultline and Tidepool")),
])
def test_multi_word_names(question: str, aspects: tuple[str, ...]) -> None:
    assert auto_plan(question).aspects == aspects


def test_sentence_start_word_is_not_a_name() -> None:
    assert auto_plan("Rotate the Vaultline key").aspects == ("Vaultline",)
    assert auto_plan("Restart pods quickly.").source is PlanSource.NONE
    assert entity_spans("Restart the Tidepool proxy.") == ["Tidepool"]


def test_a_compound_identifier_makes_its_parts_redundant() -> None:
    """The most specific identifier is kept first, so its parts do not take the slots of later clauses."""
    plan = auto_plan("Why do lookups of `app` and `shop` and `shop.app` reach the Service, and how could I "
                     "reject such namespaces?", max_aspects=3)
    assert plan.aspects == ("shop.app", "Why do lookups of and and reach the Service",
                            "how could I reject such namespaces")


def test_a_name_in_the_singular_and_the_plural_is_one_aspect() -> None:
    """The light stemmer takes "es" off a plural ("Services" -> "servic") but keeps a singular's "e": the same
    name had taken two of the six slots."""
    plan = auto_plan("Teams may have two LoadBalancer Services. How do we cap them, and can a LoadBalancer Service "
                     "skip node ports?")
    assert [a for a in plan.aspects if a.startswith("LoadBalancer")] == ["LoadBalancer Services"]


def test_a_lone_letter_or_number_is_not_an_aspect() -> None:
    assert auto_plan("Hypertension is frequently observed in type 1 diabetes patients.").aspects == ()
    assert auto_plan("Do regulatory T cells respond to IL2?").aspects == ("IL2",)


@pytest.mark.parametrize(("token", "quantity"), [
    ("5mmol/L", True), ("512Mi", True), ("30s", True), ("2.5GHz", True), ("10%", True),
    ("3M", False), ("49ers", False), ("2022", False), ("MP3", False), ("v1.29", False), ("7-Eleven", False),
])
def test_is_quantity(token: str, quantity: bool) -> None:
    assert is_quantity(token) is quantity


def test_a_measurement_is_not_an_aspect() -> None:
    """A value names no thing the evidence must be about; the names beside it stay."""
    plan = auto_plan("Did children with SFM syndrome have a plasma lactate of more than 5mmol/L?")
    assert plan.aspects == ("SFM",)
    assert auto_plan("Why is my 512Mi pod OOMKilled?").aspects == ("OOMKilled",)
    assert "3M" in auto_plan("Who founded 3M?").aspects


def test_a_number_after_a_connector_is_not_part_of_a_name() -> None:
    assert entity_spans("Which team won in München in 1930?")[0] == "München"
    assert entity_spans("Our Indexed Job of 200 shards fails.")[0] == "Indexed Job"
    assert entity_spans("Was the Random House Tower and 888 7th Avenue built first?") == [
        "Random House Tower", "888 7th Avenue"]
    assert entity_spans("Who starred in Sons of Anarchy?") == ["Sons of Anarchy"]


def test_a_version_or_decimal_does_not_start_a_name() -> None:
    """"our 1.28 API server" had planned the name "1.28 API", which reserved a page about neither."""
    assert entity_spans("What must be enabled on our 1.28 API server?") == ["API"]
    assert entity_spans("Which 2.5 GHz Xeon did the benchmark use?") == ["Xeon"]
    assert entity_spans("Who won the 2008 Summer Olympics?") == ["2008 Summer Olympics"]
    assert entity_spans("Is Python 3.12 faster?") == ["Python 3.12"]


def test_a_quantity_is_not_a_name() -> None:
    """"a 40 MB rules file" had planned the name "40 MB": an aspect that reserved a chunk for a number."""
    assert entity_spans("Our service needs a 40 MB rules file. Can a ConfigMap hold it?") == ["ConfigMap"]
    assert entity_spans("Give the sidecar 512 MiB and 2 GB of scratch space in Kubernetes.") == ["Kubernetes"]
    assert entity_spans("Is the 100 Mile House station open?") == ["100 Mile House"]  # not a unit


def test_counted_compute_is_a_quantity() -> None:
    """"800m CPU", "2 CPUs" and "1 CPU" had taken three of a question's six aspect slots (each reserving the same
    page) and pushed its last ask out of the plan."""
    assert entity_spans("A LimitRange caps containers at 800m CPU; pods with 2 CPUs run, 1 CPU ones do not.") == [
        "LimitRange"]
    assert entity_spans("Why would a pod requesting 3.5 CPUs never get exclusive cores?") == []
    assert entity_spans("We give it 4 GPUs and 16 cores on AWS.") == ["AWS"]
    assert entity_spans("Is the CPU Manager on?") == ["CPU Manager"]  # no number: a name


def test_the_pronoun_i_does_not_make_a_sentence_start_a_name() -> None:
    assert entity_spans("After I applied a default-deny NetworkPolicy, lookups failed.") == ["NetworkPolicy"]
    assert entity_spans("Since I moved the Tidepool Proxy nothing works.") == ["Tidepool Proxy"]
    assert entity_spans("Who fought in World War I before Louis I of France?") == ["World War I", "Louis I of France"]


def test_a_possessive_at_a_sentence_start_is_not_part_of_the_name() -> None:
    """"Our JVM services ..." names the JVM, not "Our JVM" (whose word "our" no page is about)."""
    assert entity_spans("Our JVM services size their heap. We run Kafka.") == ["JVM", "Kafka"]
    assert entity_spans("Their Ingress rejects it. Your Helm chart too.") == ["Ingress", "Helm"]
    assert auto_plan("Our ETL jobs fail nightly. Why?").aspects[0] == "ETL"
    assert entity_spans("Why did Our Lady Peace split?") == ["Our Lady Peace"]  # inside a sentence it is a name


def test_sentence_start_after_a_full_stop_is_not_a_name() -> None:
    assert "Restart" not in entity_spans("Read the runbook. Restart pods quickly.")


def test_sentence_start_after_a_question_mark_is_not_a_name() -> None:
    assert "Restart" not in entity_spans("What is the runbook? Restart pods quickly.")
    assert "Restart" not in auto_plan("What is the runbook? Restart pods quickly.").aspects


def test_names_do_not_run_across_a_sentence_boundary() -> None:
    assert [s.rstrip(".") for s in entity_spans("Page the on-call in Beacon. Check the dashboard.")] == ["Beacon"]
    plan = auto_plan("How do I page the on-call in Beacon. Check the Tidepool dashboard first?")
    assert not [a for a in plan.aspects if ". " in a]


def test_an_initial_or_abbreviation_does_not_end_a_sentence() -> None:
    plan = auto_plan("In what county is the city where Harris W. Fawell was born?")
    assert plan.aspects == ("Harris W Fawell",)
    assert plan.chained  # one clause describing the city: not split into two sentences
    assert sub_questions("Which war did the U.S. fight in 1812 and when did Dr. Rush sign?") == [
        "Which war did the U.S. fight in 1812", "when did Dr. Rush sign"]
    assert entity_spans("Read the runbook. Restart pods quickly.") == []  # a real full stop still ends one


def test_a_thousands_separator_is_not_a_clause_break() -> None:
    plan = auto_plan("The 1,000 Genomes project maps rare variants.")
    assert "000" not in plan.aspects and sub_questions("The 1,000 Genomes project maps rare variants.") == [
        "The 1,000 Genomes project maps rare variants"]


@pytest.mark.parametrize("question", ["What is Vaultline's root policy?", "What is Vaultline’s root policy?"])
def test_possessive_is_dropped(question: str) -> None:
    assert auto_plan(question).aspects == ("Vaultline",)


def test_sub_question_clauses_are_aspects() -> None:
    for question in ("How do I rotate keys, and how do I revoke tokens?",
                     "How do I rotate keys and how do I revoke tokens"):
        plan = auto_plan(question)
        assert plan.aspects == ("How do I rotate keys", "how do I revoke tokens")
        assert plan.chained is False


def test_a_single_clause_is_not_split() -> None:
    assert auto_plan("How do I rotate the transit key without making old rows unreadable?").aspects == ()


def test_max_aspects_keeps_the_most_specific() -> None:
    question = "Do `alpha-one`, `beta-two`, `gamma-three` and `delta-four` conflict with Tidepool?"
    assert auto_plan(question, max_aspects=2).aspects == ("alpha-one", "beta-two")
    assert len(auto_plan(question, max_aspects=4).families) == 4
    assert auto_plan(question, max_aspects=0).source is PlanSource.NONE


def test_over_the_cap_the_asks_come_before_the_scene() -> None:
    question = ("We added eight storage nodes, moved the ledger there, and the backups slowed down. "
                "How do we pin the ledger to fast disks, and how do we cap backup bandwidth?")
    assert auto_plan(question, max_aspects=2).aspects == ("How do we pin the ledger to fast disks",
                                                          "how do we cap backup bandwidth")
    # Under the cap every clause stays, in the question's order.
    assert auto_plan(question, max_aspects=6).aspects[0] == "We added eight storage nodes"


def test_over_the_cap_the_scene_keeps_its_last_clauses() -> None:
    """A scene closes on its complication, nearest the ask: "but now every other run is skipped" is what the
    evidence must explain, not where the images live."""
    question = ("Our nightly backups run from a CronJob, the images live in a private registry, we moved the "
                "cluster to a new region last week, but now every other run is skipped without any event. Why "
                "does that happen, and how do we list the skipped runs?")
    aspects = auto_plan(question).aspects
    assert "now every other run is skipped without any event" in aspects
    assert "how do we list the skipped runs" in aspects
    assert "the images live in a private registry" not in aspects


def test_over_the_cap_a_name_outlives_the_scene_clause_that_held_it() -> None:
    """The scene is cut before the asks, but a name in it is kept on its own, ahead of the asks: "DaemonSet" is
    the most specific thing the question says about the workload."""
    question = ("We need a log-forwarder DaemonSet on every Windows node that reads host event logs. "
                "Windows lacks privileged containers, so how do we give it host access, which built-in account "
                "should it use, and which Pod Security level is needed?")
    for cap in (2, 3, 4, 5):
        plan = auto_plan(question, max_aspects=cap)
        assert {"Pod Security", "DaemonSet"} <= set(plan.aspects)
        assert not any("log-forwarder" in a for a in plan.aspects)
        assert next(f for f in plan.families if f.name == "DaemonSet").entity
    # With room for it, the scene clause stays and carries its name.
    roomy = auto_plan(question, max_aspects=6).aspects
    assert "DaemonSet" not in roomy
    assert any("log-forwarder DaemonSet" in a for a in roomy)


def test_a_single_quoted_message_is_an_aspect_but_an_apostrophe_quotes_nothing() -> None:
    plan = auto_plan("After the outage the CronJob never ran again ('Too many missed start time'), and the Job's "
                     "pods keep failing. How do we fix it?")
    assert "Too many missed start time" in plan.aspects
    assert "Too" not in plan.aspects
    assert quoted_strings("the peers' names and the Job's retries") == []
    assert quoted_strings("it said \u2018insufficient cpu\u2019 and 'no nodes available'") == [
        "insufficient cpu", "no nodes available"]


def test_an_abbreviation_is_not_an_identifier() -> None:
    plan = auto_plan("Which limits apply to a pod (e.g. CPU) and how do quotas count them?")
    assert not any(a.lower().startswith("e.g") for a in plan.aspects)


@pytest.mark.parametrize("question", ["", "   ", "what?", "the of and", "How?", "???", "and, or; but."])
def test_no_aspects_gives_an_empty_plan(question: str) -> None:
    plan = auto_plan(question)
    assert plan.source is PlanSource.NONE
    assert plan.families == () and plan.aspects == ()


_WORDS = st.sampled_from(["How", "do", "I", "rotate", "`key-id`", "Vaultline", "and", "Tidepool", "Pool", "Size",
                          "what", "?", ",", ".", "--flag", "maxConn", "the", "of", "Kiss", "Tell", "Vaultline's",
                          "which", "where", "root", "token", "ERR_X_Y", '"quoted text"', "who", "of the"])


@given(st.one_of(st.text(max_size=120), st.lists(_WORDS, max_size=25).map(" ".join)),
       st.integers(min_value=0, max_value=6))
def test_auto_plan_never_fails_and_respects_max_aspects(question: str, max_aspects: int) -> None:
    plan = auto_plan(question, max_aspects=max_aspects)
    assert len(plan.families) <= max_aspects
    assert (plan.source is PlanSource.NONE) == (not plan.families)
    assert plan.aspects == tuple(f.name for f in plan.families)
    assert all(f.aspect_terms for f in plan.families)
    # every aspect adds a term no earlier aspect has
    term_sets = [frozenset(f.aspect_terms) for f in plan.families]
    assert all(not (term_sets[i] <= term_sets[j]) for i in range(len(term_sets)) for j in range(i))


# ---- chaining ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "chained"), [
    ("In which country was the composer of Kiss and Tell born?", True),
    ("What government position was held by the woman who portrayed Corliss Archer?", True),
    ("Where was the director of the film born?", True),
    ("How do I rotate keys, and how do I revoke tokens?", False),
    ("How do I rotate keys and how do I revoke tokens", False),
    ("How do I rotate the transit key?", False),
    # A description that starts from a name nests, whatever its wording and however many clauses surround it.
    ("What city is the star of Sous les pieds des femmes from?", True),
    ("Humboldt Peak, in the state where Silverton is located, is part of what mountain range?", True),
    ("How long had Mao Yushi's birthplace been the capital?", True),
    ("How do I cap the namespace's total CPU, and stop pods from talking to other teams' pods?", False),
    ("What instrument does the drummer from Bloc Party play?", True),
    ("Which novel was published in the same year as Middlemarch?", True),
    ("There is a country where direct-drive locomotives were used. Who was the mother of the king under whom "
     "the Treaty of Kiel was signed?", True),
    # A request that sets a scene over several sentences is composed by conjunction, whatever it describes: the
    # second sentence alone reads as nested ("the Deployment's own rollout").
    ("We're patching the OS on every worker one node at a time. Our checkout service must keep 2 copies "
     "running. How do I drain each node, and how should the Deployment's own rollout be tuned?", False),
])
def test_is_chained(question: str, chained: bool) -> None:
    assert is_chained(question) is chained
    assert auto_plan(question).chained is chained
    assert auto_plan(question).composition == ("chain" if chained else "parallel")


# ---- configured shapes ------------------------------------------------------------------------------


def _sample_shapes() -> tuple[QuestionShape, ...]:
    return shapes_from_config(load_config(SAMPLE_CONFIG, env={}))


@pytest.mark.parametrize("question", [
    "What is the break-glass procedure for the Vaultline root token?",
    "Who may generate a root token?",
    "How do I get emergency access to production?",
])
def test_sample_shape_matches_by_keywords(question: str) -> None:
    plan = plan_question(question, shapes=_sample_shapes())
    assert plan.source is PlanSource.SHAPE
    assert plan.shape == "break-glass"
    assert plan.families == (RequiredFamily(name="breakglass", rescue_query="break-glass procedure root token",
                                            label="breakglass"),)
    assert plan.aspects == auto_plan(question).aspects


def test_sample_shape_does_not_match_other_questions() -> None:
    plan = plan_question("How do I rotate the transit key?", shapes=_sample_shapes())
    assert plan.source is PlanSource.NONE and plan.shape is None


POOL_SHAPE = ShapeRule(name="pool-triage", keywords=("pool exhausted", "connection budget"), min_keywords=2,
                       patterns=(r"\bERR_POOL_[A-Z_]+",),
                       families=(ShapeFamily("pooling", "tidepool pool size", label="connection-pooling"),
                                 ShapeFamily("runbook", "PgPoolExhausted first steps",
                                             source_regex=r"^operations/alert-runbooks\.md$")))
OTHER_SHAPE = ShapeRule(name="later", keywords=("pool exhausted",), min_keywords=1,
                        families=(ShapeFamily("later", "q", label="x"),))


def test_shapes_from_config_match_by_pattern_or_keywords() -> None:
    shapes = shapes_from_config(Config().replace(shapes=(POOL_SHAPE, OTHER_SHAPE)))
    by_pattern = plan_question("checkout logs show err_pool_exhausted", shapes=shapes)  # case-insensitive
    assert (by_pattern.source, by_pattern.shape) == (PlanSource.SHAPE, "pool-triage")
    assert by_pattern.families == (
        RequiredFamily("pooling", "tidepool pool size", label="connection-pooling"),
        RequiredFamily("runbook", "PgPoolExhausted first steps", source_regex=r"^operations/alert-runbooks\.md$"))
    both_keywords = plan_question("The pool exhausted its connection budget", shapes=shapes)
    assert both_keywords.shape == "pool-triage"
    # one keyword of two is not enough for the first shape; the second (min 1) takes it: first match wins
    one_keyword = plan_question("Why is the pool exhausted?", shapes=shapes)
    assert one_keyword.shape == "later"
    assert plan_question("How do I rotate keys?", shapes=shapes).source is PlanSource.NONE


def test_a_shape_without_detectors_never_matches() -> None:
    shape = QuestionShape(name="empty", families=(RequiredFamily("x", "x", label="x"),), keywords=(), patterns=())
    assert not shape.matches("anything at all")


def test_explicit_plan_wins_over_shapes() -> None:
    explicit = explicit_plan([RequiredFamily("mine", "my query", label="mine")], ["my aspect"])
    plan = plan_question("What is the break-glass procedure?", shapes=_sample_shapes(), explicit=explicit)
    assert plan == explicit
    assert plan.source is PlanSource.CALLER


# ---- aspect focus -----------------------------------------------------------------------------------


def test_focus_plan_without_focus_is_the_same_plan() -> None:
    plan = auto_plan("How do I rotate keys, and how do I revoke tokens?")
    assert focus_plan(plan, None) is plan
    assert focus_plan(plan, "   ") is plan


def test_focus_plan_adds_a_new_aspect_first() -> None:
    plan = auto_plan("How do I rotate keys, and how do I revoke tokens?")
    focused = focus_plan(plan, "  audit trail  ")
    assert focused.aspects == ("audit trail", *plan.aspects)
    assert focused.families[0] == RequiredFamily("audit trail", "audit trail", aspect_terms=terms("audit trail"))
    assert focused.families[1:] == plan.families
    assert focused.notes == ("aspect focus: audit trail",)
    assert (focused.source, focused.shape, focused.chained) == (plan.source, plan.shape, plan.chained)


def test_focus_plan_moves_an_existing_aspect_first() -> None:
    plan = auto_plan("How do I rotate keys, and how do I revoke tokens?")
    focused = focus_plan(plan, "how do I revoke tokens")
    assert focused.aspects == ("how do I revoke tokens", "How do I rotate keys")
    assert focused.families == (plan.families[1], plan.families[0])


def test_focus_on_a_shape_plan_keeps_the_shape() -> None:
    plan = plan_question("What is the break-glass procedure?", shapes=_sample_shapes(), aspect_focus="revocation")
    assert plan.shape == "break-glass" and plan.source is PlanSource.SHAPE
    assert [f.name for f in plan.families] == ["revocation", "breakglass"]


# ---- JSON round trip --------------------------------------------------------------------------------


def test_round_trip_of_every_plan_kind() -> None:
    plans = [
        auto_plan("In which country was the composer of Kiss and Tell born?"),
        auto_plan("How do I rotate `payments-pii`, and how do I revoke tokens?"),
        auto_plan("What does VL_LEASE_EXPIRED mean, and is --dry-run safe?"),
        auto_plan("what?"),
        plan_question("What is the break-glass procedure?", shapes=_sample_shapes(), aspect_focus="owners"),
        EvidencePlan(families=(RequiredFamily("docs", "q", doc_ids=("a.md", "b.md")),
                               RequiredFamily("src", "q2", source_regex=r"^security/"),
                               RequiredFamily("lab", "q3", label="rbac")),
                     aspects=("x",), source=PlanSource.CALLER, notes=("n1",), chained=True),
    ]
    for plan in plans:
        assert plan_from_dict(plan.to_dict()) == plan
    assert [f.name for f in plans[2].families if f.verbatim] == ["VL_LEASE_EXPIRED", "--dry-run"]


@given(st.one_of(st.text(max_size=120), st.lists(_WORDS, max_size=25).map(" ".join)),
       st.one_of(st.none(), st.sampled_from(["audit trail", "Vaultline", "root token"])))
def test_round_trip_property(question: str, focus: str | None) -> None:
    plan = plan_question(question, shapes=_SHAPES, aspect_focus=focus)
    assert plan_from_dict(plan.to_dict()) == plan


_SHAPES = shapes_from_config(load_config(SAMPLE_CONFIG, env={}))


def test_a_statement_is_never_chained() -> None:
    """A claim to verify asks for no unnamed entity: its relative phrases describe, they are not hops."""
    assert not is_chained("Glycolysis is one of the primary glycometabolic pathways in cells.")
    assert not is_chained("The gene that encodes the protein of the cluster is expressed in the liver")
    assert is_chained("Which pathway is one of the primary glycometabolic pathways in cells?")
    assert is_chained("In what county is the city where Harris W. Fawell was born")  # a question without '?'


def test_chunk_terms_never_mix_two_chunks_that_share_an_id() -> None:
    first = make_chunk("same-id", "Vaultline rotates the transit key.", title="Keys")
    second = make_chunk("same-id", "Tidepool bounds the connection pool.", title="Pools")
    assert "vaultline" in chunk_terms(first)[0]
    assert "tidepool" in chunk_terms(second)[0] and "vaultline" not in chunk_terms(second)[0]
    assert chunk_terms(second)[1] == frozenset({"pool"})


@given(st.lists(st.sampled_from(["how", "do", "I", "rotate", "keys", "and", "why", "?", ",", ".", ";"]), max_size=12),
       st.lists(st.sampled_from([" ", "  ", "\t", "\n", " \n\t "]), min_size=12, max_size=12))
def test_sub_questions_do_not_depend_on_how_words_are_spaced(words: list[str], gaps: list[str]) -> None:
    """Runs of whitespace are read as one space (a long run had made the split backtrack cubically)."""
    spaced = "".join(w + g for w, g in zip(words, gaps, strict=False))
    assert sub_questions(spaced) == sub_questions(" ".join(spaced.split()))
    assert auto_plan(spaced).aspects == auto_plan(" ".join(spaced.split())).aspects


@given(st.text(alphabet=st.sampled_from(list("abcAB'’s _-.İß 9\n")) | st.characters(), max_size=80))
def test_content_words_give_exactly_the_terms(text: str) -> None:
    """Two implementations of one rule (terms() runs many times per query and keeps no words): they agree."""
    assert tuple(term for _, term in content_words(text)) == terms(text)


@given(st.text(alphabet=st.sampled_from(list("abcAB09's _-.:/\n\t\"")), max_size=80)
       | st.text(alphabet=st.sampled_from(list("ab's’İß _")) | st.characters(), max_size=80))
def test_a_chunks_term_set_is_the_set_of_its_terms(text: str) -> None:
    """A chunk's term set (split at what a word cannot hold on ASCII text, which most chunks are) is exactly
    the set of `terms` (one regular expression over any text): apostrophes inside, around and doubled,
    underscores, digits and non-ASCII text included."""
    assert _term_set(text) == frozenset(terms(text))


@pytest.mark.parametrize(("singular", "plural"), [("class", "classes"), ("access", "accesses"), ("pod", "pods"),
                                                  ("policy", "policies"), ("process", "processes")])
def test_a_word_and_its_plural_have_one_term(singular: str, plural: str) -> None:
    """"class" had lost its last letter ("clas") while "classes" kept it: the two never met."""
    assert stem(singular) == stem(plural)
