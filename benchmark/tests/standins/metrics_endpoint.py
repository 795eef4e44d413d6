"""`--prometheus ADDR` for the stand-in binaries: `GET /metrics` in the Prometheus text format.

A minimal exposition of the latest METRICS record (a few counters, named as the real binaries
name them: `hotmove_` prefix, `node`/`stage`/`channel` labels), served from a daemon thread with
the standard library only, so a test can scrape a stand-in run as it would a real one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Record = dict[str, Any]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    text = ",".join(f'{key}="{_label(val)}"' for key, val in labels.items())
    return f"{name}{{{text}}} {value}"


def exposition(record: Record | None) -> str:
    """The counters of one METRICS record, each with a TYPE line."""
    if record is None:
        return ""
    node = {"node": str(record.get("name", ""))}
    families: dict[str, list[str]] = {}

    def add(name: str, labels: dict[str, str], value: object) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            families.setdefault(name, []).append(_sample(name, {**node, **labels}, value))

    add(
        "hotmove_consensus_committed_txs_total",
        {},
        record.get("consensus", {}).get("committed_txs"),
    )
    for stage, values in record.get("stages", {}).items():
        add("hotmove_stage_items_total", {"stage": stage}, values.get("items"))
    for channel, values in record.get("channels", {}).items():
        add("hotmove_channel_full_total", {"channel": channel}, values.get("full"))
    add("hotmove_client_sent_total", {}, record.get("sent"))
    lines = []
    for name, samples in families.items():
        lines += [f"# TYPE {name} counter", *samples]
    return "\n".join(lines) + "\n"


def serve(address: str, latest: Callable[[], Record | None]) -> ThreadingHTTPServer:
    """Serve `GET /metrics` on `address` (host:port) until the process exits."""
    host, port = address.rsplit(":", 1)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = exposition(latest()).encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: a scrape per second would drown the log's prose."""

    server = ThreadingHTTPServer((host, int(port)), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
