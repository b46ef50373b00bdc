"""ZooKeeper's ``RateLogger``: a repeated warning is logged once, then counted.

A new message is logged at once as ``Message:<msg> Value:<value>``. The same message again
within ``interval`` ms only counts; once ``interval`` has passed since it was last written, the
count is written as ``[N times] Message: <msg>`` (``Last value:<v>`` when there is one) and the
window restarts. A different message first flushes the pending count of the previous one.
Time comes in as an argument (monotonic ms), so the logger is deterministic.
"""

from __future__ import annotations

import logging


class RateLogger:
    def __init__(self, log: logging.Logger, interval: int = 100) -> None:
        self.log = log
        self.interval = interval
        self.msg: str | None = None
        self.value: str | None = None
        self.count = 0
        self.timestamp = 0

    def flush(self) -> None:
        if self.msg is not None and self.count > 0:
            text = f"[{self.count} times] " if self.count > 1 else ""
            text += f"Message: {self.msg}"
            if self.value is not None:
                text += f" Last value:{self.value}"
            self.log.warning("%s", text)
        self.msg = None
        self.value = None
        self.count = 0

    def rate_limit_log(self, msg: str, now: int, value: str | None = None) -> None:
        if msg == self.msg:
            self.count += 1
            self.value = value
            if now - self.timestamp >= self.interval:
                self.flush()
                self.msg = msg
                self.timestamp = now
                self.value = value
        else:
            self.flush()
            self.msg = msg
            self.value = value
            self.timestamp = now
            self.log.warning("Message:%s Value:%s", msg, "null" if value is None else value)
