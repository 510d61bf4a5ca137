"""The reference agent loop (no LLM): call the tool, follow its recommendation, stop within a bound.

`ask` is what an agent built on evidex should do: proceed when told to; on `re-query`, ask again with
`aspect_focus` set to each focus the recommendation names (a missing aspect, or for a missing hop the
description that starts from a name: "the architect of the Harbour Library"; one round each, at most `max_rounds`
rounds), keeping the evidence each round adds; on `stop`, stop and hand over to the named owner. Every
decision is logged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Tool = Callable[[str, str | None], dict[str, Any]]


@dataclass
class AskTranscript:
    question: str
    rounds: list[dict[str, Any]] = field(default_factory=list)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)  # record id -> chunk, first seen
    final_action: str = ""
    final_reason: str = ""
    owner: str | None = None

    def to_dict(self, *, with_text: bool = False) -> dict[str, Any]:
        chunks = [{k: v for k, v in c.items() if with_text or k != "text"} for c in self.evidence.values()]
        return {"question": self.question, "rounds": self.rounds, "final": {
            "action": self.final_action, "reason": self.final_reason, "owner": self.owner},
            "evidence": chunks}


def ask(tool: Tool, question: str, *, max_rounds: int = 3) -> AskTranscript:
    transcript = AskTranscript(question)
    tried: set[str] = set()
    focus: str | None = None
    for round_no in range(1, max_rounds + 1):
        result = tool(question, focus)
        rec = result["decision"]["recommendation"]
        cov = result["signals"]["coverage"]
        added = []
        for group in result["evidence"]:
            for c in group["chunks"]:
                if c["record_id"] not in transcript.evidence:
                    transcript.evidence[c["record_id"]] = {"source": group["source"], "citation": c["citation"],
                                                           "record_id": c["record_id"], "round": round_no,
                                                           "text": c["text"]}
                    added.append(c["record_id"])
        transcript.rounds.append({
            "round": round_no, "aspect_focus": focus, "action": rec["action"], "reason": rec["reason"],
            "aspects_covered": cov["aspects_covered"], "aspects_missing": cov["aspects_missing"],
            "families_found_but_rejected": cov["families_found_but_rejected"],
            "confidence": round(result["signals"]["confidence"], 1), "new_evidence": added})
        if cov["aspects_not_in_index"]:
            transcript.rounds[-1]["aspects_not_in_index"] = cov["aspects_not_in_index"]
        transcript.final_action, transcript.final_reason, transcript.owner = rec["action"], rec["reason"], rec["owner"]
        if focus is not None and focus not in cov["aspects_missing"]:
            transcript.rounds[-1]["note"] = f"aspect fixed by re-query: {focus}"
        if rec["action"] != "re-query":
            break
        # An identifier no readable record holds cannot be found by searching for it again.
        remaining = [a for a in rec["focus"] if a not in tried and a not in cov["aspects_not_in_index"]]
        if not remaining:
            transcript.rounds[-1]["note"] = ("every missing aspect was already re-queried; stopping" if rec["focus"]
                                             else "the recommendation names no aspect to re-query; stopping")
            break
        focus = remaining[0]
        tried.add(focus)
    return transcript
