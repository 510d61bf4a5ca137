"""The admission gate: a score selects a candidate, the gate decides whether its text may be used.

A candidate is admitted only if every active rule passes for the requesting principal at the pinned
`retrieved_at`; otherwise it is rejected with exactly one typed reason and its text is never shown.

Reasons, in the fixed order that decides which one a rejection carries (the first failing wins):

    access-label-not-granted   none of the chunk's access labels is granted (no labels: fail closed)
    not-yet-published          published_at > retrieved_at
    expired-at-retrieval-time  expires_at <= retrieved_at
    missing-exact-citation-anchor  no citation URI or no citation anchor (ingest stores none where the anchor
                                   a chunk would cite does not exist in its source: an HTML id, a PDF page),
                                   or a URI whose scheme is not one of `[gate] citation_schemes` (a
                                   `javascript:` or `data:` link is no place a reader can check)

Timing: for every candidate the gate evaluates *every* active rule and only then picks the reason by the
fixed order above. A restricted record therefore costs the same rule work as an admitted one; there is no
early exit that would make an access denial measurably faster than a freshness or citation check. The
rules are plain Python comparisons, so small data-dependent differences remain (label-set sizes); this
removes the obvious difference, it is not constant-time in the cryptographic sense.

A `Rejection` carries ids, a reason and an owner, never text, title, heading or excerpt, and the gate
logs only ids, reasons and counts (logger `evidex.admission`).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import ClassVar, Protocol

from evidex.errors import ConfigError
from evidex.types import Candidate, Chunk, SearchFilters
from evidex.types import RejectionVisibility as RejectionVisibility  # re-exported: a policy names it

log = logging.getLogger("evidex.admission")


class RejectReason(enum.Enum):
    """Why a candidate was not admitted. Declaration order is evaluation order."""

    ACCESS = "access-label-not-granted"
    NOT_PUBLISHED = "not-yet-published"
    EXPIRED = "expired-at-retrieval-time"
    NO_CITATION = "missing-exact-citation-anchor"

    @property
    def rank(self) -> int:
        """Position in the fixed evaluation order (0 = checked first)."""
        return _REASON_ORDER.index(self)


_REASON_ORDER: tuple[RejectReason, ...] = tuple(RejectReason)


@dataclass(frozen=True)
class Principal:
    """Who is asking, and the access labels granted to them (from their key, never the request body).

    Build with `Principal.of`, which sorts and de-duplicates the labels.
    """

    name: str
    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a principal needs a non-empty name")
        if not all(isinstance(x, str) and x for x in self.labels):
            raise ValueError(f"principal {self.name!r}: labels must be non-empty strings")
        if list(self.labels) != sorted(set(self.labels)):
            raise ValueError(f"principal {self.name!r}: labels must be sorted and unique; use Principal.of")

    @classmethod
    def of(cls, name: str, labels: Iterable[str]) -> Principal:
        return cls(name=name, labels=tuple(sorted(set(labels))))


class Rule(Protocol):
    """One admission rule: None when the chunk passes, else the reason it fails."""

    name: str

    def check(self, chunk: Chunk, principal: Principal, retrieved_at: datetime) -> RejectReason | None: ...


class AccessRule:
    """Admit only if one of the chunk's access labels is granted. No labels at all: rejected (fail closed)."""

    name = "access"

    def check(self, chunk: Chunk, principal: Principal, retrieved_at: datetime) -> RejectReason | None:
        return None if self.grants(chunk, principal) else RejectReason.ACCESS

    @staticmethod
    def grants(chunk: Chunk, principal: Principal) -> bool:
        labels = {x for x in chunk.provenance.access_labels if x}
        return not labels.isdisjoint(principal.labels)


class FreshnessRule:
    """Valid at `retrieved_at`: published at or before it (None: no claim, passes) and not expired at it
    (expires_at == retrieved_at is expired; None never expires). A naive chunk time is read as UTC, as
    ingest does."""

    name = "freshness"

    def check(self, chunk: Chunk, principal: Principal, retrieved_at: datetime) -> RejectReason | None:
        published_at = _aware(chunk.provenance.published_at)
        expires_at = _aware(chunk.provenance.expires_at)
        is_unpublished = published_at is not None and published_at > retrieved_at
        is_expired = expires_at is not None and expires_at <= retrieved_at
        if is_unpublished:
            return RejectReason.NOT_PUBLISHED
        return RejectReason.EXPIRED if is_expired else None


DEFAULT_CITATION_SCHEMES = frozenset({"http", "https"})


def uri_scheme(uri: str) -> str:
    """The scheme of `uri`, lower-cased ("" for a relative reference): `uri_scheme("JavaScript:x")` is
    "javascript"."""
    head, colon, _ = uri.strip().partition(":")
    return head.lower() if colon and head[:1].isalpha() and all(c.isalnum() or c in "+-." for c in head) else ""


@dataclass(frozen=True)
class CitationRule:
    """An exact, addressable citation: a citation URI with one of `schemes` and a non-empty anchor."""

    schemes: frozenset[str] = DEFAULT_CITATION_SCHEMES
    name = "citation"  # not a field: the rule's config name

    def check(self, chunk: Chunk, principal: Principal, retrieved_at: datetime) -> RejectReason | None:
        uri = (chunk.provenance.citation_uri or "").strip()
        has_uri = bool(uri) and uri_scheme(uri) in self.schemes
        has_anchor = bool((chunk.citation_anchor or "").strip())
        return None if has_uri and has_anchor else RejectReason.NO_CITATION


# The rules are stateless, so one instance each serves every request. Keys are the config names.
_RULE_INSTANCES: tuple[Rule, ...] = (AccessRule(), FreshnessRule(), CitationRule())
RULES: Mapping[str, Rule] = MappingProxyType({rule.name: rule for rule in _RULE_INSTANCES})
_VALID_RULES = ", ".join(RULES)


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.utcoffset() is not None:
        return value
    return value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Rejection:
    """A rejected candidate as the rest of evidex may see it. Deliberately no text, title or excerpt."""

    record_id: str
    doc_id: str
    reason: RejectReason
    owner: str | None


@dataclass(frozen=True)
class GateDecision:
    """Admitted candidates and rejections, each in the order the candidates came in."""

    admitted: tuple[Candidate, ...]
    rejected: tuple[Rejection, ...]

    def counts(self) -> dict[str, int]:
        """Rejections per reason value, every reason present (0 when none), keys sorted."""
        counts = {reason.value: 0 for reason in RejectReason}
        for rejection in self.rejected:
            counts[rejection.reason.value] += 1
        return dict(sorted(counts.items()))

    def visible_rejections(self, policy: RejectionVisibility) -> list[dict[str, str]]:
        """The per-record rejections a requester may see under `policy` ({"record_id", "reason"} each).

        Whatever is left out here is still visible as a number in `counts()`.
        """
        if policy is RejectionVisibility.COUNTS_ONLY:
            return []
        return [
            {"record_id": r.record_id, "reason": r.reason.value}
            for r in self.rejected
            if policy is RejectionVisibility.ALL_REASONS or r.reason is not RejectReason.ACCESS
        ]

    def to_dict(self, policy: RejectionVisibility) -> dict[str, object]:
        """The requester-facing view: admitted ids, visible rejections, counts. JSON-stable."""
        return {
            "admitted": [c.chunk.record_id for c in self.admitted],
            "rejected": self.visible_rejections(policy),
            "rejected_counts": self.counts(),
        }


_DEFAULT_RULES: tuple[str, ...] = tuple(RULES)


def hidden_path_reasons(*, unpublished: bool, rejected: bool) -> frozenset[str]:
    """The rejection reasons whose records a requester sees without a source path (`[gate]
    hide_unpublished_paths`, `hide_rejected_paths`): `hidden_path_reasons(unpublished=True, rejected=False)` is
    {"not-yet-published"}. Access denials never show one in any case."""
    if rejected:
        return frozenset(r.value for r in RejectReason)
    return frozenset({RejectReason.NOT_PUBLISHED.value}) if unpublished else frozenset()


@dataclass(frozen=True)
class GatePolicy:
    """Which rules run and what the requester sees. Validated on construction: an unknown rule name is a
    configuration error, never a silent allow or deny."""

    rules: tuple[str, ...] = _DEFAULT_RULES
    visibility: RejectionVisibility = RejectionVisibility.REASONS_EXCEPT_ACCESS
    citation_schemes: frozenset[str] = DEFAULT_CITATION_SCHEMES  # what a citation URI may start with

    def __post_init__(self) -> None:
        if not self.rules:
            raise ConfigError(f"the admission gate needs at least one rule; choose from: {_VALID_RULES}")
        for name in self.rules:
            if name not in RULES:
                raise ConfigError(f"unknown admission rule {name!r}; choose from: {_VALID_RULES}")
        if len(set(self.rules)) != len(self.rules):
            raise ConfigError(f"admission rules listed more than once: {list(self.rules)}")
        if not isinstance(self.visibility, RejectionVisibility):
            raise ConfigError(f"rejection visibility must be a RejectionVisibility, got {self.visibility!r}")
        if not self.citation_schemes:
            raise ConfigError("[gate] citation_schemes names no scheme: no citation could be admitted")

    @classmethod
    def from_names(cls, rules: Sequence[str], visibility: str) -> GatePolicy:
        if isinstance(rules, str):
            raise ConfigError("admission rules must be a sequence of names, not one string; "
                              "use GatePolicy.from_config for 'access,freshness,citation'")
        try:
            chosen = RejectionVisibility.from_str(visibility)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return cls(rules=tuple(rules), visibility=chosen)

    @classmethod
    def from_config(cls, rules: str, visibility: str, citation_schemes: str = "http,https") -> GatePolicy:
        """From the `[gate]` config values: a comma-separated rule list, a visibility name and the comma-separated
        citation schemes."""
        names = [name.strip().lower() for name in rules.split(",")]
        schemes = frozenset(x.strip().lower() for x in citation_schemes.split(",") if x.strip())
        return dataclasses.replace(cls.from_names([name for name in names if name], visibility),
                                   citation_schemes=schemes)


@dataclass(frozen=True)
class AdmissionGate:
    """Applies a `GatePolicy` to ranked candidates. Holds no state between requests."""

    policy: GatePolicy = field(default_factory=GatePolicy)

    name: ClassVar[str] = "admit"

    def readable(self, principal: Principal) -> SearchFilters | None:
        """The store-side filter of the access rule: records carrying one of the principal's labels (None
        when the policy does not check access). Searches steered by the requester's own words run under it,
        so a restricted record can neither be probed for a word nor shift a count the requester sees."""
        return SearchFilters(access_labels=principal.labels) if AccessRule.name in self.policy.rules else None

    def may_read(self, principal: Principal, chunk: Chunk) -> bool:
        """The per-record form of `readable`: whether the access rule lets `principal` read `chunk` (always,
        when the policy does not check access)."""
        return AccessRule.name not in self.policy.rules or AccessRule.grants(chunk, principal)

    def admit(self, candidates: Sequence[Candidate], principal: Principal, retrieved_at: datetime) -> GateDecision:
        if retrieved_at.utcoffset() is None:
            raise ValueError("retrieved_at must be timezone-aware (pin it once per request, in UTC)")
        rules = [CitationRule(self.policy.citation_schemes) if name == CitationRule.name else RULES[name]
                 for name in self.policy.rules]
        admitted: list[Candidate] = []
        rejected: list[Rejection] = []
        for candidate in candidates:
            chunk = candidate.chunk
            # Every rule runs for every candidate; the reason is picked afterwards (see module docstring).
            checks = [rule.check(chunk, principal, retrieved_at) for rule in rules]
            failures = [reason for reason in checks if reason is not None]
            if not failures:
                admitted.append(candidate)
                continue
            reason = min(failures, key=lambda r: r.rank)
            rejected.append(Rejection(chunk.record_id, chunk.doc_id, reason, chunk.provenance.owner))
            log.debug("rejected record %s: %s", chunk.record_id, reason.value)  # ids only: a path can name the page
        decision = GateDecision(admitted=tuple(admitted), rejected=tuple(rejected))
        log.debug("admission for %s: %d admitted, %d rejected %s", principal.name, len(admitted),
                  len(rejected), decision.counts())
        return decision
