"""The report's account of the cluster's administration (R38-R40): every membership and topic
change in the order it ended (its `at s`, the end line's time), what it did (each rebalance
with its moves), and the broker set after it. It reads the `faults.jsonl` lines the job collected; it judges nothing."""
from __future__ import annotations

import json
from typing import Any

from testbed.common.words import counted


def admin_rows(entries: list[dict], brokers: list[int]) -> list[list[str]]:
    """One row per admin action: [at s, action, subject, what it did, brokers after it].
    `brokers` are the ids the run started with."""
    members = set(brokers)
    # an add-broker registers its broker, then rebalances onto it, then ends: its rebalance's
    # row (same origin, ended first) already has the broker (trial32: "brokers after: 1, 2, 3"
    # beside a move onto 4)
    adding = {entry.get("origin"): _json(entry.get("params"))["broker"]["id"] for entry in entries
              if entry["do"] == "add-broker" and _json(entry.get("effect")).get("added")}
    rows = []
    for entry in entries:
        params, effect = _json(entry.get("params")), _json(entry.get("effect"))
        do = entry["do"]
        # by what was done, not by the error: an add-broker whose rebalance failed still added
        # its broker, a remove-broker whose unregistration failed still took its broker out
        if do == "add-broker" and effect.get("added"):
            members.add(params["broker"]["id"])
        elif do == "rebalance" and entry.get("origin") in adding:
            members.add(adding[entry["origin"]])
        elif do == "remove-broker" and effect.get("removed"):
            members.discard(int(str(entry["target"]).removeprefix("broker:")))  # validated broker:N
        subject = entry.get("target") or _subject(do, params)
        rows.append([f"{entry['t']:.3f}", do, subject, _what(do, effect),
                     ", ".join(map(str, sorted(members)))])
    return rows


def _json(text: Any) -> dict:
    value = json.loads(text) if isinstance(text, str) else text
    return value if isinstance(value, dict) else {}


def _subject(do: str, params: dict) -> str:
    if do == "add-broker":
        broker = params.get("broker", {})
        return f"broker {broker.get('id')}" + (f" (rack {broker['rack']})" if broker.get("rack") else "")
    topic = params.get("topic")
    return str(topic.get("name") if isinstance(topic, dict) else topic or "")


def _what(do: str, effect: dict) -> str:
    if "error" in effect:
        return f"error: {effect['error']}"
    if do == "rebalance":
        moves = "; ".join(f"{m['partition']}: {m['from']} -> {m['to']}" for m in effect.get("moves", []))
        n = effect.get("replicas_moved", 0)
        # (a plan short of balance moved fewer than a balanced one needs: trial32 read "lower
        # bound 2" beside 1 move without a word on why)
        balance = ("balanced" if effect.get("balanced") else
                   "not balanced: distinct brokers per partition and the racks' spread left no better plan")
        return (f"{counted(n, 'replica move')} (a balanced plan needs at least "
                f"{effect.get('lower_bound', 0)}; {balance}){': ' + moves if moves else ''}; "
                f"new leaders elected: {', '.join(effect.get('elected', [])) or 'none'}")
    if do == "add-broker":
        shared = "; it took its share by the rebalance just before" if "rebalance" in effect else ""
        return f"{effect.get('added')} registered and unfenced{shared}"
    if do == "remove-broker":
        done = effect.get("rebalance", {})
        left = "unregistered" if done.get("unregistered") else f"not unregistered ({done.get('unregister_error')})"
        how = "a clean" if done.get("shutdown") else "an unclean"
        return f"its replicas moved away by the rebalance just before, then {how} shutdown; {left}"
    if do == "create-topic":
        return f"created with {effect.get('partitions')} partitions, every one led"
    if do == "delete-topic":
        return f"deleted with its {effect.get('partitions')} partitions; every replica's log removed"
    if do == "add-partitions":
        return f"partitions {', '.join(map(str, effect.get('partitions', [])))} added, every one led"
    return json.dumps(effect)
