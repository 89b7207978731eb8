"""pack.toml's alert fields (`notify`, `notify_failed_sources`, `notify_on`, `max_age`):
their types, and how a target is named in logs and files without its secret.

A target is an http(s) URL (a JSON webhook, or a Slack incoming webhook when its host is
hooks.slack.com) or `env:NAME`, read from the environment variable NAME when `kpack serve`
starts (a Slack webhook URL is a secret: keep it out of files under version control).
What is done with them lives in flows/alerts.py; this module only reads and names them.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator

ENV_PREFIX = "env:"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
SLACK_HOSTS = ("hooks.slack.com", "hooks.slack-gov.com")
MAX_AGE_MIN_S = 10.0  # Prefect's proactive triggers look at windows of 10 s or more
MAX_AGE_MAX_S = 366 * 86_400.0

# Outcomes that say nothing unless a pack asks for them in `notify_on`; failed, crashed,
# refused, partial and stale builds always notify the pack's targets.
OptInKind = Literal["published", "unchanged"]


class TargetError(ValueError):
    """A notify target cannot be used; the message names it without its secret parts."""


def describe_target(target: str) -> str:
    """A target as logs, files and pages may show it: `env:NAME` as written, a URL as its
    kind and origin only (`slack hooks.slack.com`, `webhook https://ops.example:8443`):
    paths, query strings and user info are where webhook secrets live."""
    if target.startswith(ENV_PREFIX):
        return target
    parts = urlsplit(target)
    host = parts.hostname or "?"
    if is_slack(target):
        return f"slack {host}"
    port = f":{parts.port}" if parts.port else ""
    shown = f"[{host}]" if ":" in host else host
    return f"webhook {parts.scheme}://{shown}{port}"


def is_slack(url: str) -> bool:
    """Whether `url` is a Slack incoming webhook (sent through Prefect's SlackWebhook
    block, as Slack text) rather than a generic JSON webhook."""
    parts = urlsplit(url)
    return (parts.scheme == "https" and (parts.hostname or "") in SLACK_HOSTS
            and parts.path.startswith("/services/"))


def _check_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise TargetError("not a valid URL; write https://host/path or env:NAME") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"{describe_target(url)}: a target is an http(s) URL with a host, "
                          "or env:NAME")
    if parts.username or parts.password:
        raise TargetError(f"{describe_target(url)}: user:password@ in a notify URL; put the "
                          "whole URL in an environment variable and write env:NAME")
    return url


def check_target(value: str) -> str:
    """`value` as a target (stripped); TargetError says why it cannot be one."""
    value = value.strip()
    if value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX):]
        if not _ENV_NAME.match(name):
            raise TargetError(f"{value!r}: env: names an environment variable, like "
                              "env:KPACK_SLACK_URL")
        return value
    return _check_url(value)


def resolve_target(target: str, environ: dict[str, str] | None = None) -> str:
    """The URL a target stands for: `env:NAME` read from the environment (TargetError
    when unset, empty or not a usable URL; the message names the variable, never its
    value), a URL as it is."""
    if not target.startswith(ENV_PREFIX):
        return target
    name = target[len(ENV_PREFIX):]
    value = (os.environ if environ is None else environ).get(name, "").strip()
    if not value:
        raise TargetError(f"notify target {target}: the environment variable {name} is not "
                          "set; set it to the webhook URL where kpack serve runs")
    try:
        return _check_url(value)
    except TargetError as exc:
        raise TargetError(f"notify target {target}: {exc}") from None


def parse_duration(value: object) -> float | None:
    """Seconds from a number of seconds or a string with a unit: "90s", "30m", "36h",
    "2d", "1w". None stays None (the default: twice the schedule's interval)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("give seconds (a number) or a duration such as \"36h\" or \"2d\"")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value.lower())):
        seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    else:
        raise ValueError("give seconds (a number) or a duration such as \"90m\", \"36h\" "
                         "or \"2d\"")
    if not MAX_AGE_MIN_S <= seconds <= MAX_AGE_MAX_S:
        raise ValueError(f"must be between {MAX_AGE_MIN_S:g} seconds and 366 days")
    return seconds


NotifyTarget = Annotated[str, AfterValidator(check_target)]
MaxAge = Annotated[float | None, BeforeValidator(parse_duration)]
