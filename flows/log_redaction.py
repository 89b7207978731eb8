"""URLs in log lines lose their path and query: where webhook secrets live.

The Prefect server kpack runs (flows/server_main.py) sends the alerts' notifications
(flows/alerts.py). When a webhook answers with an error, Prefect 3.8.8's
CustomWebhookNotificationBlock raises httpx's error, whose text names the whole URL,
and the server logs it with its traceback. `redact_handlers` puts a filter on every
handler configured in the process that rewrites `https://ops.example/hooks/T0/sEcReT?x=1`
as `https://ops.example/…` in the message and in the formatted traceback.
"""

from __future__ import annotations

import logging
import re

_URL = re.compile(r"\b(https?://[^/\s'\"<>?#]+)([/?#][^\s'\"<>]*)")


def redact(text: str) -> str:
    """`text` with every http(s) URL cut to its scheme, host and port."""
    return _URL.sub(lambda m: f"{m.group(1)}/…", text)


class RedactUrls(logging.Filter):
    """A handler filter: the record's message and traceback with URLs redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "://" in message:
            record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def redact_handlers() -> list[logging.Handler]:
    """Add RedactUrls to every handler of every logger of this process (call it after
    Prefect has configured logging). Returns the handlers it was added to."""
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)]
    added = []
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, RedactUrls) for f in handler.filters):
                handler.addFilter(RedactUrls())
                added.append(handler)
    return added
