"""`evidex.admission` re-exports exactly its public names (the httpx pattern)."""

from __future__ import annotations

from evidex import admission


def test_all_lists_every_public_name_and_each_resolves() -> None:
    public = {name for name in vars(admission) if not name.startswith("_")}
    public -= {"audit", "gate", "verification"}  # the submodules themselves
    assert sorted(admission.__all__) == sorted(public)
    for name in set(admission.__all__) - {"RULES", "RejectionVisibility"}:  # the mode is config's too: evidex.types
        assert getattr(admission, name).__module__.startswith("evidex.admission.")
    assert admission.RejectionVisibility.__module__ == "evidex.types"
