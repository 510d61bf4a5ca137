"""Questions and expectations shared by the adapter tests, written for them (not evaluation questions)."""

from __future__ import annotations

from datetime import UTC, datetime

from evidex.admission.gate import Principal

READER = Principal.of("docs-bot", ["engineering-read"])
SECURITY = Principal.of("security-bot", ["engineering-read", "security-team"])
AT = datetime(2026, 11, 30, tzinfo=UTC)  # the demo's instant: every page the reader may see is valid then

# The key-rotation page answers it; its citation is its URL and the section's anchor.
ROTATION_QUESTION = "Which vlctl command creates a new version of a transit key, and when may old versions go?"
ROTATION_CITATION = "https://handbook.northwind.example/security/key-rotation/#rotate-keys"

# Only a page labelled security-team answers it.
BREAKGLASS_QUESTION = "Walk me through the break-glass use of the Vaultline root token"
BREAKGLASS_SOURCE = "security/breakglass-root-token.md"
MARKER = "RESTRICTED-MARKER"

METADATA_KEYS = {"citation", "citation_uri", "citation_anchor", "source", "evidence_family", "status", "confidence",
                 "recommendation", "missing_aspects", "snapshot_id"}
