"""The executor LLM: backend catalogue (`backends`) and the OpenAI-compatible client (`client`)."""
