"""The frozen-mode key forwarder: a loopback HTTP server that adds the guidance endpoint's key
(from its own environment) to every request Reef sends upstream (`server`, the only user of
aiohttp; `python -m harness.adapters.guidance_proxy`), and its start-up as a process beside a
run (`process`)."""

#: Where the forwarder (and only the forwarder) reads the guidance endpoint's key.
KEY_VARIABLE = "GUIDANCE_TTT_GUIDANCE_API_KEY"
