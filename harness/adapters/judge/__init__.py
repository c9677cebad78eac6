"""The judge: the FrontierCS HTTP client (`frontiercs`), verdict hardening (`verdict`), judge
suites."""
