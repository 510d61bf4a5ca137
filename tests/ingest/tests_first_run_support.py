"""A small product's docs, written for these tests: plain markdown, no front matter."""

from __future__ import annotations

from typing import Any

DOCS = {
    "index.md": "# Widgets\n\nWidgets sync your settings across every region you run in.\n",
    "guides/install.md": ("# Installing widgets\n\nRun `widget setup --region eu` on each host. It writes "
                          "/etc/widget.conf and starts the widget daemon.\n"),
    "guides/rollback.md": ("# Rolling back\n\nEach release is tagged `widget-vX.Y`. "
                           "To roll a widget back to the last release, run `widget rollback --to previous` and "
                           "restart the widget daemon. The previous release's config is kept for seven days.\n"),
}


def evidence_citations(result: Any) -> set[str]:
    """Every citation (URI#anchor) of a search_with_reasoning result's evidence."""
    return {c["citation"] for group in result["evidence"] for c in group["chunks"]}
