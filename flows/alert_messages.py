"""What an alert says: the subject and body templates of the SendNotification actions
that flows/alerts.py installs, one per kind of alert and kind of target.

Prefect's actions service renders them (Jinja, in its sandbox) with the automation's
triggering `event` and its `firing`, then hands them to the notification block. A generic
webhook receives the body as is, one JSON object:

    {"kpack": 1, "kind": "failed", "pack": "docs", "build_id": "20261130T030001123Z",
     "reason": "BuildError: docs: none of the 3 URLs could be fetched (...)",
     "counts": null, "flow_run_url": "http://127.0.0.1:4200/runs/flow-run/<id>",
     "builds_url": "http://127.0.0.1:8765/builds?pack=docs",
     "at": "2026-11-30T03:00:09.512+00:00", "alert_id": "failed:<event id>",
     "text": "kpack docs: build 20261130T030001123Z failed: BuildError: ..."}

`kind` is failed, crashed, refused, partial, stale, published or unchanged; `counts` the
build's (articles, sections, entities, ..., failed_sources, sources; a refused build's
sources, failed_sources, sections and entities) or null or {} when the build ended before
it counted anything; for stale, `build_id`, `counts` and `flow_run_url` are
the last successful build's. A Slack webhook receives `text` and the two links as Slack
text. Every value is written with Jinja's tojson, so the body is valid JSON whatever the
reason says; a missing value renders as null, never as a failed action.

Delivery is at least once: when the server's SQLite database is busy, Prefect's triggers
and actions services retry a message whose handling failed after the notification went
out, and the receiver gets the same alert again (seen under load: one partial build told
twice, 4 s apart). `alert_id` (the kind and the id of the event that fired the alert) is
the same on every repeat; a receiver drops repeats by it.
"""

from __future__ import annotations

import json

from flows import alert_events as ev

FAILED, CRASHED, REFUSED, PARTIAL, STALE = "failed", "crashed", "refused", "partial", "stale"
PUBLISHED, UNCHANGED = "published", "unchanged"
KINDS = (FAILED, CRASHED, REFUSED, PARTIAL, STALE, PUBLISHED, UNCHANGED)
RUN_CRASHED = "prefect.flow-run.Crashed"  # Prefect's event: the run's process died
_RUN_PREFIX = len("prefect.flow-run.")
RUN_EXCEPTION = "Flow run encountered an exception: "  # how Prefect opens a Failed message


def _lit(value: str) -> str:
    """A constant as a Jinja string literal (JSON's escapes are Jinja's)."""
    return json.dumps(value)


def duration_words(seconds: float) -> str:
    """`seconds` as a message says it: "90 s", "45 min", "36 h", "2 d"."""
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h" if seconds < 172_800 else f"{seconds / 86_400:.3g} d"


def _fields(kind: str, pack: str, max_age_s: float) -> dict[str, str]:
    """Jinja expressions for each field of the message of `kind`, read from its event."""
    if kind == CRASHED:  # Prefect's flow-run event: the run is the resource
        return {"kind": f"event.event[{_RUN_PREFIX}:]|lower",
                "build_id": f"event.resource.name[{len(pack) + 1}:]",
                "reason": "event.resource['prefect.state-message']",
                "counts": "none",
                "run": f"event.resource.id[{_RUN_PREFIX}:]"}
    fields = {"kind": _lit(kind), "build_id": "event.payload.build_id",
              "reason": "event.payload.reason", "counts": "event.payload.counts",
              "run": "event.payload.flow_run_id"}
    if kind == STALE:  # the triggering event is the last success, or kpack serve's start
        age = duration_words(max_age_s)
        fields["reason"] = (
            f'"no successful build for more than {age} (max_age): " ~ ('
            f'"none since kpack serve started at " ~ event.occurred.isoformat() '
            f'if event.event == {_lit(ev.WATCHED)} else '
            f'"the last was build " ~ event.payload.build_id ~ " (" ~ event.payload.status '
            f'~ ") at " ~ event.occurred.isoformat())')
        fields["build_id"] = (f"(none if event.event == {_lit(ev.WATCHED)} "
                              "else event.payload.build_id)")
        fields["counts"] = f"(none if event.event == {_lit(ev.WATCHED)} else event.payload.counts)"
    return fields


def _set_vars(kind: str, pack: str, ui: str, max_age_s: float) -> str:
    f = _fields(kind, pack, max_age_s)
    reason = (f"(({f['reason']})|default('')|string).split('\\n')[0]"
              f"|replace({_lit(RUN_EXCEPTION)}, '')|truncate({ev.MAX_REASON_CHARS})")
    return (
        f"{{% set k = ({f['kind']})|default('') %}}"
        f"{{% set b = ({f['build_id']})|default(none) %}}"
        f"{{% set r = {reason} %}}"
        f"{{% set c = ({f['counts']})|default(none) %}}"
        f"{{% set run = ({f['run']})|default('') %}}"
        f"{{% set url = ({_lit(ui.rstrip('/') + '/runs/flow-run/')} ~ run) if run and "
        f"{_lit(ui)} else none %}}"
        f"{{% set text = 'kpack ' ~ {_lit(pack)} ~ ': ' ~ "
        f"('build ' ~ b ~ ' ' if b and k != {_lit(STALE)} else '') ~ k ~ ': ' ~ r %}}"
    )


def subject(kind: str, pack: str) -> str:
    """The notification's subject (Slack shows it as the title)."""
    return f"kpack {pack}: {{{{ ({_fields(kind, pack, 0)['kind']})|default('') }}}}"


def json_body(kind: str, pack: str, *, ui: str, builds_url: str, max_age_s: float) -> str:
    """The body template of a generic webhook's message: one JSON object (module doc)."""
    return _set_vars(kind, pack, ui, max_age_s) + (
        '{"kpack": 1, "kind": {{ k|tojson }}, "pack": ' + json.dumps(pack)
        + ', "build_id": {{ b|tojson }}, "reason": {{ r|tojson }}, "counts": {{ c|tojson }}, '
        '"flow_run_url": {{ url|tojson }}, "builds_url": ' + json.dumps(builds_url)
        + ', "at": {{ firing.triggered.isoformat()|default(none)|tojson }}, '
        '"alert_id": {{ (k ~ ":" ~ event.id)|tojson }}, '
        '"text": {{ text|tojson }}}')


def slack_body(kind: str, pack: str, *, ui: str, builds_url: str, max_age_s: float) -> str:
    """The body template of a Slack message: the one line, then the links."""
    def esc(expr: str) -> str:  # Slack's three escapes in text
        return f"({expr})|replace('&', '&amp;')|replace('<', '&lt;')|replace('>', '&gt;')"
    return _set_vars(kind, pack, ui, max_age_s) + (
        "{{ " + esc("text") + " }}\n"
        "{% if url %}<{{ url }}|flow run in Prefect> · {% endif %}"
        "<" + builds_url + "|builds in the explorer>")
