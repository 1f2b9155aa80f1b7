"""Clause A1 egress judged from the capture, the --agent-network grammar, and the model
API's requests and tokens read from forwarded bytes (OpenAI-compatible, Ollama, chunked,
streamed, TLS)."""

from __future__ import annotations

import json

import pytest

from lab.campaign.modelapi import read_traffic, usage_of
from lab.errors import UsageError
from lab.model.egress import EgressRecord, Endpoint, PacketView, judge_egress, parse_network

MODEL = "127.0.0.1:11434"


def test_the_network_grammar() -> None:
    assert parse_network("host") is None and parse_network("none") is None
    assert parse_network("model=127.0.0.1:11434") == (Endpoint("127.0.0.1", 11434),)
    two = parse_network("model=127.0.0.1:1,model=10.0.0.5:8080,model=127.0.0.1:1")
    assert two == (Endpoint("127.0.0.1", 1), Endpoint("10.0.0.5", 8080))


@pytest.mark.parametrize(
    "value", ["bridge", "model=localhost:80", "model=127.0.0.1", "model=127.0.0.1:0", "x=1.2.3.4:5",
              "host,model=127.0.0.1:80"]
)  # fmt: skip
def test_a_bad_network_is_one_usage_sentence(value: str) -> None:
    with pytest.raises(UsageError, match="--agent-network"):
        parse_network(value)


def packet(src: str, dst: str, proto: str = "tcp", flags: str = "S") -> PacketView:
    return PacketView(proto=proto, src=src, dst=dst, flags=flags)


def test_a1_passes_when_every_packet_is_to_or_from_the_model() -> None:
    seen = [packet("127.0.0.1:50000", MODEL), packet(MODEL, "127.0.0.1:50000")]
    verdict, why, disallowed = judge_egress([MODEL], seen, None)
    assert verdict == "pass" and disallowed == ()
    assert "all 2 packet(s)" in why and "(1 to it)" in why


def test_a1_fails_on_another_port_and_a_lookup() -> None:
    seen = [
        packet("127.0.0.1:50000", MODEL),
        packet("127.0.0.1:50001", "127.0.0.1:11435"),  # SYN to another port
        packet("127.0.0.1:11435", "127.0.0.1:50001", flags="R."),  # its RST
        packet("127.0.0.1:40000", "127.0.0.53:53", "udp", ""),  # a DNS query
        packet("127.0.0.1", "icmp:127.0.0.1", "icmp", "type 3"),  # port unreachable back
    ]
    verdict, why, disallowed = judge_egress([MODEL], seen, None)
    assert verdict == "fail"
    assert disallowed == ("tcp 127.0.0.1:11435", "udp 127.0.0.53:53")
    assert "4 packet(s) to or from 2 destination(s) other than the allowed" in why


def test_a_reply_alone_is_still_a_failure_and_named() -> None:
    verdict, _, disallowed = judge_egress(
        [MODEL], [packet("127.0.0.1:9", "127.0.0.1:50001", flags="R.")], None
    )
    assert verdict == "fail" and disallowed == ("tcp 127.0.0.1:50001",)


def test_a1_without_a_capture_is_not_observed_never_a_pass() -> None:
    verdict, why, _ = judge_egress([MODEL], None, "tcpdump is not installed")
    assert verdict == "not-observed" and "tcpdump is not installed" in why


def http(method_path: str, body: dict[str, object]) -> bytes:
    data = json.dumps(body).encode()
    return (
        f"POST {method_path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )


def answer(body: bytes, *, chunked: bool = False) -> bytes:
    if chunked:
        half = len(body) // 2
        parts = b"".join(
            f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in (body[:half], body[half:])
        )
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + parts + b"0\r\n\r\n"
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def test_openai_and_ollama_requests_and_tokens_are_counted() -> None:
    openai = json.dumps({"usage": {"prompt_tokens": 12, "completion_tokens": 5}}).encode()
    ollama = json.dumps({"done": True, "prompt_eval_count": 7, "eval_count": 3}).encode()
    keep_alive = (
        http("/v1/chat/completions", {}) + http("/v1/chat/completions", {}),
        answer(openai) + answer(openai, chunked=True),
    )
    streams = [keep_alive, (http("/api/chat", {}), answer(ollama))]
    traffic = read_traffic(streams)
    assert traffic.readable == "http" and traffic.requests == 3
    assert (traffic.prompt_tokens, traffic.completion_tokens) == (31, 13)
    assert traffic.paths == {"/api/chat": 1, "/v1/chat/completions": 2}
    record = EgressRecord(allowed=(MODEL,), verdict="pass", why="", traffic=traffic)
    assert record.tokens() == {"prompt": 31, "completion": 13} and record.model_requests == 3


def test_a_streamed_answer_counts_its_usage_chunk() -> None:
    sse = (
        b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n'
        b'data: {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}\n\n'
        b"data: [DONE]\n\n"
    )
    assert usage_of(sse) == (4, 2)
    ndjson = b'{"done": false}\n{"done": true, "prompt_eval_count": 9, "eval_count": 1}\n'
    assert usage_of(ndjson) == (9, 1)
    assert usage_of(b'{"choices": []}') is None


def test_tls_is_not_readable_and_counts_nothing() -> None:
    traffic = read_traffic([(b"\x16\x03\x01\x02\x00" + b"\x00" * 40, b"\x16\x03\x03")])
    assert traffic.readable == "tls" and traffic.requests is None
    record = EgressRecord(allowed=(MODEL,), verdict="pass", why="", traffic=traffic)
    assert record.tokens() is None and record.readable_words() == "TLS: not readable"


def test_no_usage_reported_is_none_not_zero() -> None:
    traffic = read_traffic([(http("/v1/chat/completions", {}), answer(b'{"choices": []}'))])
    assert traffic.requests == 1 and traffic.prompt_tokens is None
    assert read_traffic([]).readable == "none"
    assert read_traffic([(b"SSH-2.0-x\r\n", b"")]).readable == "other"


def test_the_agent_s_records_read_back_through_from_dict() -> None:
    """lab merge reads results.json back: egress, processes and trajectory survive it."""
    from lab.model.campaign import AgentRecord, RepetitionRecord
    from lab.model.egress import Connection, ModelTraffic
    from lab.model.processes import ExecRow, ProcessRecord
    from lab.model.trajectory import JudgedSnapshot, TrajectoryRecord

    rep = RepetitionRecord(
        index=1, outcome="plateaued", reason="r", failed_clauses={}, baseline_commit="0" * 40,
        agent=AgentRecord(exit_status=2, timed_out=False, duration_s=1.0, lingering_count=1,
                          contained=True, sandbox_error=None, stdout_bytes=1, stderr_bytes=2,
                          stderr_tail="sh: cannot open", cgroup={"cpu_usage_s": 0.5},
                          lingering=({"pid": 9, "comm": "sleep", "argv": ["sleep"], "age_s": 1},)),
        patch=None,
        egress=EgressRecord(
            allowed=(MODEL,), verdict="fail", why="w", packets=9, disallowed=("udp x:53",),
            connections=(Connection(endpoint=MODEL, opened_s=0.1, duration_s=0.2, bytes_up=3,
                                    bytes_down=4),),
            traffic=ModelTraffic(readable="http", requests=2, prompt_tokens=5,
                                 completion_tokens=6, paths={"/api/chat": 2}),
        ),
        processes=ProcessRecord(
            execs=(ExecRow(pid=1, parent=0, path="/usr/bin/make", argv=("make",), start_s=0.0,
                           end_s=1.0, exit_status=0, signal=None),),
            exec_count=1, left={"home": [], "tmp": [], "truncated": False},
            verification=({"command": "make -C native", "runs": 0, "exit_statuses": []},),
        ),
        trajectory=TrajectoryRecord(
            taken=2, distinct=2, plateau_k=3, plateau_at=None, regressions=(("C1", 1, 2),),
            judged=(JudgedSnapshot(index=1, at_s=0.5, commit="a", status="judged",
                                   clauses={"C1": "pass"}, new_passes=("C1",)),),
        ),
    )  # fmt: skip
    again = RepetitionRecord.from_dict(rep.to_dict())
    assert again == rep and again.to_dict() == rep.to_dict()
