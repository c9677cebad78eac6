"""Adapters to the outside services, one family each: the executor LLM (`executor`), the judge
(`judge`), Reef (`reef`) and the frozen-mode key forwarder (`guidance_proxy`). Each takes
explicit parameters, never `serve.yaml`; the families import the core and their own family only,
and `child_process`: how each family starts its local service processes (the judge's, Reef's,
the forwarder's) so that they die with the command that started them.
"""
