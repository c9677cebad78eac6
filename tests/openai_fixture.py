"""The scripted OpenAI-compatible server the tests stand in for model services with; it lives in
`harness.rehearsal.openai_server` because `guidance-ttt rehearse` uses it too."""

from harness.rehearsal.openai_server import OpenAIFixture, RecordedRequest, Reply, ReplySource

__all__ = ["OpenAIFixture", "RecordedRequest", "Reply", "ReplySource"]
