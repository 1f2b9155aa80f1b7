"""A model API stub for the tests (stdlib only): a local HTTP server on 127.0.0.1 that
answers like an OpenAI-compatible API (``POST /v1/chat/completions``, ``usage``) and like
Ollama (``POST /api/chat``, ``prompt_eval_count`` / ``eval_count``), with a fixed reply that
tells a scripted agent what to change. It counts what it answered, so a test can compare
the lab's reading of the forwarded stream with the truth.

    with ModelStub() as stub:               # listens on 127.0.0.1:<ephemeral>
        stub.address                        # "127.0.0.1:40123"
        stub.requests, stub.prompt_tokens, stub.completion_tokens

    python3 tests/assets/model_stub.py 11434     # standalone, until interrupted
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: what the stub's model "says": the speed-up the scripted agents apply
REPLY = "set CHUNK_BYTES to (1024 * 1024) in native/client.h"
COMPLETION_TOKENS = len(REPLY.split())


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            asked = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            asked = {}
        words = sum(len(str(m.get("content", "")).split()) for m in asked.get("messages", []))
        if self.path == "/v1/chat/completions":
            answer: dict[str, Any] = {
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY}}],
                "usage": {"prompt_tokens": words, "completion_tokens": COMPLETION_TOKENS,
                          "total_tokens": words + COMPLETION_TOKENS},
            }  # fmt: skip
        elif self.path == "/api/chat":
            answer = {"message": {"role": "assistant", "content": REPLY}, "done": True,
                      "prompt_eval_count": words, "eval_count": COMPLETION_TOKENS}  # fmt: skip
        else:
            self.send_error(404)
            return
        self.server.count(words)
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.lock = threading.Lock()
        self.requests = self.prompt_tokens = self.completion_tokens = 0

    def count(self, prompt: int) -> None:
        with self.lock:
            self.requests += 1
            self.prompt_tokens += prompt
            self.completion_tokens += COMPLETION_TOKENS


class ModelStub:
    def __init__(self, port: int = 0) -> None:
        self.server = _Server(port)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    @property
    def requests(self) -> int:
        return self.server.requests

    @property
    def prompt_tokens(self) -> int:
        return self.server.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.server.completion_tokens

    def __enter__(self) -> ModelStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    stub = ModelStub(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(f"model stub on {stub.address}", flush=True)
    stub.server.serve_forever()
